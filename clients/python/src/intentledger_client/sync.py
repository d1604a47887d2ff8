"""The client for scripts and notebooks, which have no event loop of their own (or one that
is already running, as Jupyter's is): the same ``Client``, on an event loop in a thread of its
own, each method waiting for its coroutine there.

    with SyncClient(bootstrap, principal_id="agent-7", tenant_id="acme") as client:
        outcome = client.call("run-1", "wallet.debit", {...}, call_id="c1", operation_key="k")
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from types import TracebackType
from typing import Any, TypeVar

from intentledger_client.client import DEFAULT_WAIT_S, Client
from intentledger_client.outcomes import Handle, Outcome

T = TypeVar("T")


class SyncClient:
    def __init__(self, bootstrap: str, **options: Any) -> None:
        """``options``: those of ``Client``."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="intentledger-client")
        self._thread.start()
        try:
            self._client = self._run(self._started(bootstrap, options))
        except BaseException:
            self._stop_loop()
            raise

    @staticmethod
    async def _started(bootstrap: str, options: dict[str, Any]) -> Client:
        client = Client(bootstrap, **options)
        await client.start()
        return client

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._thread.is_alive():
            try:
                self._run(self._client.close())
            finally:
                self._stop_loop()

    def call(self, run_id: str, tool: str, arguments: dict[str, Any], *, call_id: str,
             tool_version: str | None = None, operation_key: str | None = None,
             wait: float = DEFAULT_WAIT_S, settle: bool = True) -> Outcome:
        return self._run(self._client.call(run_id, tool, arguments, call_id=call_id,
                                           tool_version=tool_version, operation_key=operation_key,
                                           wait=wait, settle=settle))

    def propose_openai_chat(self, run_id: str, message: dict[str, Any],
                            **options: Any) -> list[Outcome]:
        return self._run(self._client.propose_openai_chat(run_id, message, **options))

    def propose_openai_responses(self, run_id: str, output: list[dict[str, Any]] | dict[str, Any],
                                 **options: Any) -> list[Outcome]:
        return self._run(self._client.propose_openai_responses(run_id, output, **options))

    def propose_anthropic(self, run_id: str, message: dict[str, Any],
                          **options: Any) -> list[Outcome]:
        return self._run(self._client.propose_anthropic(run_id, message, **options))

    def submit(self, run_id: str, message: dict[str, Any], call_ids: Sequence[str],
               **options: Any) -> list[Outcome]:
        return self._run(self._client.submit(run_id, message, call_ids, **options))

    def wait(self, handle: Handle, timeout: float = DEFAULT_WAIT_S, *,
             settle: bool = True, proposer: str | None = None,
             person: str | None = None) -> Outcome:
        return self._run(self._client.wait(handle, timeout, settle=settle, proposer=proposer,
                                           person=person))

    def withdraw(self, handle: Handle, reason: str, *, wait: float = DEFAULT_WAIT_S) -> Outcome:
        return self._run(self._client.withdraw(handle, reason, wait=wait))

    def _run(self, work: Coroutine[Any, Any, T]) -> T:
        if not self._thread.is_alive():
            work.close()
            raise RuntimeError("the client is closed")
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
