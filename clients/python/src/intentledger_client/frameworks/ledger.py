"""What every framework adapter shares: the registry's tools under the names a model may call
them by, the call of one through the client under the key of the framework's tool call, and
what the model reads of its outcome.

The key is ``keys.call_key(run, tool-call id)``: a framework running the same call again (a
resumed run, a re-executed graph node, a retry after approval) is answered with the one intent's
outcome, never a second effect. The model reads ``pairing.content``, the same JSON every
provider's pairing gives it: status, reason code, the tool's validated result fields, and for a
call that has not settled our fixed note that proposing it again is safe.

No framework validates arguments against a raw JSON schema; the ledger's intake does, and its
refusal (``denied`` with a reason code) is what the model reads, like any other denial.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from intentledger_client.client import DEFAULT_WAIT_S, Client
from intentledger_client.keys import call_key
from intentledger_client.outcomes import Outcome
from intentledger_client.tools import ToolDefinition, named

NOT_AN_OBJECT = json.dumps({"status": "denied", "reason_code": "arguments_not_an_object"})
"""What the model reads when its arguments are not a JSON object: nothing was proposed."""


@dataclass(frozen=True)
class LedgerTool:
    """One registry tool, as a framework shows it to the model and calls it."""

    definition: ToolDefinition
    name: str
    """The name the model calls it by: the registry's, or its first alias every provider accepts."""
    client: Client
    wait: float

    @property
    def description(self) -> str:
        return self.definition.description

    @property
    def schema(self) -> dict[str, Any]:
        return self.definition.arguments_schema

    async def call(self, run_id: str, tool_call_id: str, arguments: dict[str, Any]) -> Outcome:
        """Propose the call, keyed by the run and the framework's id for it, and return what it
        came to by ``wait`` seconds."""
        return await self.client.call(run_id, self.definition.name, arguments,
                                      call_id=tool_call_id,
                                      operation_key=call_key(run_id, tool_call_id),
                                      wait=self.wait)


def ledger_tools(client: Client, catalog: Iterable[ToolDefinition], *,
                 wait: float = DEFAULT_WAIT_S) -> list[LedgerTool]:
    """The catalogue's tools, named as OpenAI's and Anthropic's models accept (the strictest
    rule, so one set of tools serves any model a framework drives)."""
    return [LedgerTool(definition, name, client, wait) for name, definition in named(catalog, "openai")]


def arguments_object(text: str) -> dict[str, Any] | None:
    """The model's arguments as a JSON object (frameworks that hand over the raw text); None
    if they are not one."""
    try:
        value = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
