"""What a decision reads: the call's rows, and the judges it consults that live outside them.

``Judges`` are values of this process (the tool registry's entry, the loaded policy, the
dependency's breaker, the settings), ``capacity`` the batch's count of its tools' slots
(``capacity.py``); a decision reads no table and sends nothing. The breaker
is the one piece of memory a decision updates: an attempt that went unanswered counts against
its dependency before the same decision asks whether a lookup may go, as it always did.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from services.dispatcher.authority import PolicyView, Refusal, refusal_at_dispatch
from services.dispatcher.breaker import Breakers
from services.dispatcher.capacity import Capacity
from services.dispatcher.repository import Attempt, Call, Run
from services.dispatcher.settings import DispatcherSettings
from shared.capabilities import PublicKeys
from shared.tools import ToolSpec


@dataclass(frozen=True)
class Repair:
    """An operator's resolution waiting for the call's next step."""

    event_id: uuid.UUID
    request: dict[str, Any]


@dataclass(frozen=True)
class Judges:
    settings: DispatcherSettings
    policy: PolicyView
    keys: PublicKeys
    breakers: Breakers


@dataclass(frozen=True)
class Situation:
    call: Call
    run: Run
    attempts: tuple[Attempt, ...]
    now: datetime
    fence: int
    """The fence of the lease this step holds."""
    tool: ToolSpec | None
    judges: Judges
    capacity: Capacity = field(default_factory=lambda: Capacity({}))
    """The bounded tools' slots, as this step's batch sees them (none: nothing is bounded)."""
    authorized: bool = False
    """This decision has found the call's authority whole at ``now`` already and goes on to
    send it (``forward.record_intent``): the same capability, intent and run at the same
    instant, so it is not verified a second time (a check is about 0.3 ms of CPU, most of it
    the Ed25519 verification and the RFC 8785 forms, on the path of every proposal)."""

    @property
    def latest(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def settings(self) -> DispatcherSettings:
        return self.judges.settings

    @property
    def dependency(self) -> str:
        return dependency_of(self.tool)

    def refusal(self) -> Refusal | None:
        """Authority at the instant of dispatch (``authority.py``)."""
        if self.authorized:
            return None
        return refusal_at_dispatch(self.call, self.run, self.judges.policy, self.judges.keys,
                                   self.now, requires_approval=self.tool.requires_approval)


def dependency_of(tool: ToolSpec) -> str:
    """What a circuit breaker guards: the endpoint, shared by every tool behind it."""
    return tool.http_url if tool.adapter == "http" else f"kafka:{tool.topic}"
