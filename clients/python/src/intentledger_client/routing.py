"""Answers to the calls waiting for them: every record read off the tenant's results topic
is offered to the calls it concerns, by run and provider call id (the intake's answer, told
apart by the id of the record it answers) and then by the intent's id (the states announced
after it: awaiting approval, settled).

No lock: records are routed on the event loop, one at a time, and a call is registered
before its proposal is sent, so no answer can arrive before its call is there to take it.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from intentledger_client.contracts import (OUTCOME_OF, TOOL_CALL_AWAITING_APPROVAL,
                                           TOOL_CALL_SETTLED, Announcement, ProposalOutcome,
                                           SettledStatus, ToolCallAwaitingApproval,
                                           ToolCallSettled)
from intentledger_client.outcomes import Handle, Outcome, outcome_of

RECENT_STATES = 4096
"""Announced states remembered per client, for a call that learns its intent's id (from its
intake answer, a duplicate's from the original's) after the state went by."""
ANNOUNCED: dict[str, type[ToolCallSettled] | type[ToolCallAwaitingApproval]] = {
    TOOL_CALL_SETTLED: ToolCallSettled, TOOL_CALL_AWAITING_APPROVAL: ToolCallAwaitingApproval}


UNKNOWN_STATUS = "settled_status_unknown"
"""The reason of a settled state whose status this client's contract does not know."""
_STATUSES = frozenset(get_args(SettledStatus))


class Call:
    """One proposed call, waiting. Its state is the one announced at the highest offset (the
    latest), whether read live or while catching up: awaiting approval, then settled."""

    def __init__(self, handle: Handle, *, settle: bool, proposer: str | None = None,
                 person: str | None = None) -> None:
        """``proposer``: the answer counts only if it names this principal as the call's
        proposer, and ``person`` as the person it was proposed for (None: for no person); one
        naming another makes the call ``foreign`` (and done), following nothing."""
        self.handle = handle
        self.settle = settle
        self.proposer = proposer
        self.person = person
        self.foreign = False
        self.answer: ProposalOutcome | None = None
        self.state: Announcement | None = None
        self._state_at = -1
        self._early: list[ProposalOutcome] = []
        self._changed = asyncio.Event()
        self.catch_ups: set[asyncio.Task[None]] = set()
        """Re-reads of what went by before it was registered, for it: stopped with it."""
        self.closed = False
        self.read_from_start = False
        """Every record of its run's partition is (or will be) offered to it: it was placed at
        offset 0 (a resumed handle read again from the start, or a partition still empty).
        A duplicate's original, answered on that partition, then needs no look-back."""

    def placed(self, partition: int, offset: int | None) -> None:
        """Its answers are on ``partition``, from ``offset`` on (None: where the handle says)."""
        offset = self.handle.offset if offset is None else offset
        self.handle = self.handle.model_copy(update={"partition": partition, "offset": offset})
        self.read_from_start = offset == 0

    def sent(self, proposal_id: uuid.UUID) -> list[ProposalOutcome]:
        """The producer's acknowledgement: from now on only answers to this record count.
        The answers read before it, to be offered again."""
        self.handle = self.handle.model_copy(update={"proposal_id": proposal_id})
        early, self._early = self._early, []
        return early

    def take_answer(self, answer: ProposalOutcome) -> bool:
        """True when it is this call's answer and names an intent to follow. A duplicate's
        intent is the original's, whose settled states may be anywhere in the partition: its
        answers are then looked for from the start (``Handle.offset``)."""
        if self.handle.proposal_id is None:
            self._early.append(answer)  # sent, not yet acknowledged: kept until it is
            return False
        if answer.proposal_id != self.handle.proposal_id or self.answer is not None:
            return False
        if self.proposer is not None and not self._proposed(answer):
            self.foreign = True
            self._changed.set()
            return False
        self.answer = answer
        if answer.logical_call_id is not None:
            self.handle = self.handle.model_copy(update={
                "logical_call_id": answer.logical_call_id,
                "intent_run_id": answer.intent_run_id,
                "offset": 0 if answer.outcome == "duplicate" else self.handle.offset})
        self._changed.set()
        return answer.logical_call_id is not None

    def _proposed(self, answer: ProposalOutcome) -> bool:
        """Whether the answer names this call's proposer and person. An answer with no
        ``person_id`` at all was written by an intake from before persons were told (a handle
        older than that upgrade): its principal alone decides, as it did then."""
        return answer.principal_id == self.proposer and (
            "person_id" not in answer.model_fields_set or answer.person_id == self.person)

    def take_state(self, offset: int, state: Announcement) -> None:
        if offset > max(self.handle.settled_after, self._state_at) and not _stale(self.state,
                                                                                  state):
            self.state, self._state_at = state, offset
            self._changed.set()

    @property
    def done(self) -> bool:
        if self.state is not None or self.foreign:
            return True
        return self.answer is not None and (not self.settle or self.answer.outcome == "rejected")

    async def wait(self, timeout: float) -> Outcome:
        """The outcome by ``timeout`` seconds; ``pending`` if it has not settled by then."""
        try:
            async with asyncio.timeout(timeout):
                while not self.done:
                    await self._changed.wait()
                    self._changed.clear()
        except TimeoutError:
            pass
        handle = self.handle
        if self.state is not None:  # a later wait on it waits for a later state
            handle = handle.model_copy(update={"settled_after": self._state_at})
        return outcome_of(handle, self.answer, self.state)


class Router:
    def __init__(self, on_duplicate: Callable[[Call], None]) -> None:
        """``on_duplicate``: told of a call answered as a duplicate, whose original's settled
        states may have gone by before it was registered."""
        self._on_duplicate = on_duplicate
        self._by_call: dict[tuple[str, str], set[Call]] = {}
        self._by_intent: dict[uuid.UUID, set[Call]] = {}
        self._recent: OrderedDict[uuid.UUID, tuple[int, Announcement]] = OrderedDict()

    def register(self, call: Call) -> None:
        self._by_call.setdefault((call.handle.run_id, call.handle.call_id), set()).add(call)
        if call.handle.logical_call_id is not None:
            self._follow(call, call.handle.logical_call_id)

    def unregister(self, call: Call) -> None:
        """It waits no more: nothing is routed to it again, and its re-reads stop."""
        call.closed = True
        for task in call.catch_ups:
            task.cancel()
        _discard(self._by_call, (call.handle.run_id, call.handle.call_id), call)
        if call.handle.logical_call_id is not None:
            _discard(self._by_intent, call.handle.logical_call_id, call)

    def route(self, offset: int, value: bytes | None, only: Iterable[Call] | None = None) -> None:
        """Offer one record to the calls it concerns (to ``only`` these, when catching up)."""
        event_type, payload = _parsed(value)
        try:
            if event_type in OUTCOME_OF:
                answer = ProposalOutcome.model_validate(_known(ProposalOutcome, payload))
                key = (answer.run_id, answer.call_id or "")
                for call in list(self._by_call.get(key, ()) if only is None else only):
                    if (call.handle.run_id, call.handle.call_id) == (answer.run_id, answer.call_id):
                        self._offer(call, answer)
            elif (model := ANNOUNCED.get(event_type or "")) is not None:
                state = model.model_validate(_known(model, _readable(model, payload)))
                if only is None:
                    self._remember(offset, state)
                intent = state.logical_call_id
                for call in list(self._by_intent.get(intent, ()) if only is None else only):
                    if call.handle.logical_call_id == intent and not call.closed:
                        call.take_state(offset, state)
        except ValidationError:
            return  # not an answer this client understands: nobody's answer, no crash

    def sent(self, call: Call, proposal_id: uuid.UUID) -> None:
        for answer in call.sent(proposal_id):
            self._offer(call, answer)

    def _offer(self, call: Call, answer: ProposalOutcome) -> None:
        if call.closed:
            return  # a re-read's record for a call that stopped waiting
        if call.take_answer(answer) and answer.logical_call_id is not None:
            self._follow(call, answer.logical_call_id)
            elsewhere = answer.intent_run_id not in (None, call.handle.run_id)
            if answer.outcome == "duplicate" and (elsewhere or not call.read_from_start):
                self._on_duplicate(call)

    def _follow(self, call: Call, intent: uuid.UUID) -> None:
        self._by_intent.setdefault(intent, set()).add(call)
        if (seen := self._recent.get(intent)) is not None:
            call.take_state(*seen)

    def _remember(self, offset: int, state: Announcement) -> None:
        seen = self._recent.get(state.logical_call_id)
        if seen is not None and (seen[0] > offset or _stale(seen[1], state)):
            return  # caught up on an older one: the later state stays
        self._recent[state.logical_call_id] = (offset, state)
        self._recent.move_to_end(state.logical_call_id)
        while len(self._recent) > RECENT_STATES:
            self._recent.popitem(last=False)


def _stale(current: Announcement | None, new: Announcement) -> bool:
    """An approval is awaited only before anything is sent, so it never follows a settled
    state; but the policy announces it and the dispatcher the settlement, two outboxes the
    relay drains independently, so the policy's record can reach the topic second. A settled
    state stays."""
    return isinstance(current, ToolCallSettled) and isinstance(new, ToolCallAwaitingApproval)


K = TypeVar("K")


def _discard(index: dict[K, set[Call]], key: K, call: Call) -> None:
    waiting = index.get(key)
    if waiting is not None:
        waiting.discard(call)
        if not waiting:
            del index[key]


def _known(model: type[BaseModel], payload: object) -> object:
    """The fields this client's contract version knows: a newer ledger may add fields (an
    additive change, within one contract major), and an answer must not become nobody's, and
    its call pending for ever, because it says more than this client can read."""
    if not isinstance(payload, dict):
        return payload
    return {name: value for name, value in payload.items() if name in model.model_fields}


def _readable(model: type[BaseModel], payload: object) -> object:
    """A settled state in a status this client's contract does not know (a ledger speaking a
    newer contract) is read as MANUAL_REVIEW with reason ``settled_status_unknown``: its call
    ends instead of waiting for ever for a state it could never read, as ``needs_review``,
    never ``failed`` (whether it took effect is not known, and an agent told "failed" may
    propose it again under another key); the model is told so (``pairing``)."""
    if model is not ToolCallSettled or not isinstance(payload, dict):
        return payload
    status: Any = payload.get("status")
    if not isinstance(status, str) or status in _STATUSES:
        return payload
    return {**payload, "status": "MANUAL_REVIEW", "reason_code": UNKNOWN_STATUS}


def _parsed(value: bytes | None) -> tuple[str | None, object]:
    """The envelope's event type and payload; someone else's garbage on the topic is neither."""
    try:
        envelope = json.loads(value or b"")
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(envelope, dict):
        return None, None
    event_type = envelope.get("event_type")
    return (event_type if isinstance(event_type, str) else None), envelope.get("payload")
