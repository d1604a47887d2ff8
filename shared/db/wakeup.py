"""LISTEN on a dedicated connection, so a polling loop (the relay's outbox scan, the
dispatcher's due calls) reacts to new work in milliseconds.

A pooled connection would be ``UNLISTEN *``-reset on release, hence a connection of its own.
NOTIFY is only a hint: it is lost while this connection is down, so after every reconnect the
waiter is woken once to rescan, and it rescans on its own interval regardless. A listener that
can act on the payload itself (the relay: the outbox that has a new row) is handed each one
instead of waking the waiter, so a notification costs no scan.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import asyncpg

from shared.retry import backoff_delay

log = logging.getLogger(__name__)


class Wakeup:
    def __init__(self, database_url: str, application_name: str, channel: str,
                 on_payload: Callable[[str], None] | None = None) -> None:
        """``on_payload``: called with each notification's payload, in place of a wake-up."""
        self._channel = channel
        self._on_payload = on_payload
        self._database_url = database_url
        self._application_name = application_name
        self._event = asyncio.Event()
        self._connection: asyncpg.Connection | None = None

    async def run(self, stopping: asyncio.Event) -> None:
        """Keep one LISTENing connection alive until ``stopping`` is set."""
        failures = 0
        while not stopping.is_set():
            if self._connection is None or self._connection.is_closed():
                try:
                    await self._listen()
                    failures = 0
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
                    failures += 1
                    log.warning("LISTEN connection failed (%s); retrying", error)
                    await _sleep_or_stop(stopping, backoff_delay(failures))
                    continue
            await _sleep_or_stop(stopping, 0.5)
        self._event.set()  # release a waiter so it sees ``stopping`` without its full timeout
        if self._connection is not None and not self._connection.is_closed():
            await self._connection.close()

    def wake(self) -> None:
        """Wake the waiter now, as a notification would."""
        self._event.set()

    async def wait(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            pass
        self._event.clear()

    async def _listen(self) -> None:
        if self._connection is not None:
            self._connection.terminate()
        self._connection = await asyncpg.connect(
            self._database_url, server_settings={"application_name": self._application_name})
        await self._connection.add_listener(self._channel, self._notified)
        self._event.set()  # anything inserted while we were not listening is still pending
        log.info("listening on %s", self._channel)

    def _notified(self, _connection, _pid: int, _channel: str, payload: str) -> None:
        if self._on_payload is None:
            self._event.set()
        else:
            self._on_payload(payload)


async def _sleep_or_stop(stopping: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stopping.wait(), seconds)
    except TimeoutError:
        pass
