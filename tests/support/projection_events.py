"""Realistic ledger histories for the projection's tests: per run, the events the intake, the
policy and the dispatcher would publish for a mix of stories (success, denial, approval,
reconciliation, a stuck UNKNOWN, manual review, a refusal at dispatch, a saga that compensates),
with dispatcher versions, workers, fences, attempts and receipts, on four ledger roles."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from services.projection.facts import Delivery
from shared.contracts.authorizations import (APPROVAL_REQUESTED, AUTHORIZATION_ALLOWED,
                                             AUTHORIZATION_DENIED)
from shared.contracts.dispatch import (COMPENSATION_REQUESTED, COMPENSATION_SETTLED,
                                       DISPATCH_INTENT_RECORDED, DISPATCH_REFUSED,
                                       MANUAL_REVIEW_REQUIRED, RUN_ABORTED, TOOL_ATTEMPT_STARTED,
                                       TOOL_EFFECT_RECONCILED, TOOL_OUTCOME_MARKED_UNKNOWN,
                                       TOOL_RESULT_RECORDED)
from shared.contracts.effects import EFFECT_COMMITTED
from shared.contracts.intake import DUPLICATE_PROPOSAL, PROPOSAL_ACCEPTED, PROPOSAL_REJECTED
from shared.ids import new_event_id
from shared.messaging.envelope import Envelope
from shared.runs import RunKey
from shared.topology import LEDGER_AUTHORIZATIONS, LEDGER_DISPATCH, LEDGER_EFFECTS, LEDGER_INTAKE

ROLES = ("intake", "authorizations", "dispatch", "effects")
POLICY_VERSION = "1e96901de4f359c0"
STORIES = ("succeeded", "denied", "approved", "awaiting", "reconciled", "unknown", "manual",
           "refused", "saga", "rejected")
EXPECTED_STATUS = {"succeeded": "completed", "denied": "completed", "approved": "completed",
                   "awaiting": "running", "reconciled": "completed", "unknown": "needs_attention",
                   "manual": "needs_attention", "refused": "aborted", "saga": "aborted",
                   "rejected": "completed"}


TOPIC_OF_ROLE = {"intake": LEDGER_INTAKE, "authorizations": LEDGER_AUTHORIZATIONS,
                 "dispatch": LEDGER_DISPATCH, "effects": LEDGER_EFFECTS}


@dataclass
class Published:
    role: str
    envelope: Envelope

    @property
    def delivery(self) -> Delivery:
        """As the projection's consumer receives it, from its ledger topic."""
        return Delivery(TOPIC_OF_ROLE[self.role], self.envelope)


@dataclass
class Call:
    intent: dict[str, Any]
    version: int = 1

    @property
    def id(self) -> str:
        return self.intent["logical_call_id"]


@dataclass
class RunStory:
    run_id: str = field(default_factory=lambda: f"run-{uuid.uuid4().hex[:12]}")
    tenant_id: str = "acme"
    principal_id: str = "agent-7"
    events: list[Published] = field(default_factory=list)
    _at: datetime = field(default_factory=lambda: datetime(2026, 3, 14, 9, tzinfo=UTC))

    @property
    def key(self) -> RunKey:
        return RunKey(self.tenant_id, self.run_id)

    # -- the stories ------------------------------------------------------------------------

    def tell(self, story: str) -> RunStory:
        getattr(self, story)()
        return self

    def succeeded(self) -> Call:
        call = self.accept()
        self.allow(call)
        return self.dispatch_and_succeed(call)

    def denied(self) -> Call:
        call = self.accept()
        self.decide(call, AUTHORIZATION_DENIED, reason_code="amount_over_cap")
        return call

    def approved(self) -> Call:
        call = self.accept()
        self.decide(call, APPROVAL_REQUESTED)
        self.allow(call)
        return self.dispatch_and_succeed(call)

    def awaiting(self) -> Call:
        call = self.accept()
        self.decide(call, APPROVAL_REQUESTED)
        return call

    def reconciled(self) -> Call:
        call = self.unknown()
        self.step(call, TOOL_ATTEMPT_STARTED, "RECONCILING", attempt=2, kind="lookup",
                  worker="w-2", fence=2)
        self.step(call, TOOL_EFFECT_RECONCILED, "SUCCEEDED", attempt=2, kind="lookup",
                  worker="w-2", fence=2, **self._receipt(call, attempt=2, worker="w-2", fence=2))
        return call

    def unknown(self) -> Call:
        call = self.accept()
        self.allow(call)
        self.step(call, DISPATCH_INTENT_RECORDED, "INTENT_RECORDED")
        self.step(call, TOOL_ATTEMPT_STARTED, "DISPATCHING", attempt=1, kind="send")
        self.step(call, TOOL_OUTCOME_MARKED_UNKNOWN, "UNKNOWN", attempt=1, kind="send")
        return call

    def manual(self) -> Call:
        call = self.unknown()
        self.step(call, MANUAL_REVIEW_REQUIRED, "MANUAL_REVIEW", attempt=1, kind="send",
                  reason="no_reconciliation_path")
        return call

    def refused(self) -> Call:
        call = self.accept()
        self.allow(call)
        self.step(call, DISPATCH_REFUSED, "DENIED", reason="capability_expired")
        self.step(call, RUN_ABORTED, "DENIED", keep_version=True, reason="capability_expired")
        return call

    def saga(self) -> Call:
        """A debit succeeds, the next call is rejected by its tool, the debit is refunded on the
        policy's capability."""
        debit = self.succeeded()
        failing = self.accept(tool="inventory.reserve")
        self.allow(failing)
        self.step(failing, DISPATCH_INTENT_RECORDED, "INTENT_RECORDED")
        self.step(failing, TOOL_ATTEMPT_STARTED, "DISPATCHING", attempt=1, kind="send")
        self.step(failing, TOOL_RESULT_RECORDED, "FAILED", attempt=1, kind="send",
                  reason="rejected_by_tool")
        self.step(failing, RUN_ABORTED, "FAILED", keep_version=True, reason="rejected_by_tool")
        refund = Call(self._intent("wallet.refund") | {"compensates": debit.id,
                                                       "provider_call_id": f"compensation:{debit.id}"},
                      version=1)
        self.step(debit, COMPENSATION_REQUESTED, "COMPENSATING")
        self.allow(refund)  # the policy authorizes the compensation the dispatcher proposed
        self.step(refund, DISPATCH_INTENT_RECORDED, "INTENT_RECORDED")
        self.step(refund, TOOL_ATTEMPT_STARTED, "DISPATCHING", attempt=1, kind="send")
        self.step(refund, TOOL_RESULT_RECORDED, "SUCCEEDED", attempt=1, kind="send",
                  **self._receipt(refund, attempt=1))
        self.step(debit, COMPENSATION_SETTLED, "COMPENSATED")
        return debit

    def rejected(self) -> Call:
        """A refused proposal (no call) and a duplicate beside an accepted, succeeded call."""
        call = self.succeeded()
        self._publish("intake", PROPOSAL_REJECTED, self._outcome("rejected", call_id="call-x",
                                                                 reason_code="unknown_tool"))
        self._publish("intake", DUPLICATE_PROPOSAL, self._outcome(
            "duplicate", call_id="call-again", logical_call_id=call.id, state="SUCCEEDED"))
        return call

    # -- the events -------------------------------------------------------------------------

    def accept(self, tool: str = "wallet.debit") -> Call:
        call = Call(self._intent(tool))
        self._publish("intake", PROPOSAL_ACCEPTED, call.intent)
        return call

    def allow(self, call: Call) -> None:
        self.decide(call, AUTHORIZATION_ALLOWED)

    def decide(self, call: Call, kind: str, **fields: Any) -> None:
        decision = {"intent": call.intent, "decision_id": str(uuid.uuid4()),
                    "policy_version": POLICY_VERSION}
        now = self._tick()
        if kind == AUTHORIZATION_ALLOWED:
            decision |= {"rule": "debits", "capability": self._capability(call, decision, now)}
        elif kind == AUTHORIZATION_DENIED:
            decision |= {"rule": "debits", "message": "over the cap", **fields}
        else:
            decision |= {"rule": "debits", "quorum": 1, "approvers": ["operator:*"],
                         "requested_at": now.isoformat(),
                         "expires_at": (now + timedelta(minutes=10)).isoformat()}
        self._publish("authorizations", kind, decision, at=now)

    def dispatch_and_succeed(self, call: Call) -> Call:
        self.step(call, DISPATCH_INTENT_RECORDED, "INTENT_RECORDED")
        self.step(call, TOOL_ATTEMPT_STARTED, "DISPATCHING", attempt=1, kind="send")
        self.step(call, TOOL_RESULT_RECORDED, "SUCCEEDED", attempt=1, kind="send",
                  **self._receipt(call, attempt=1))
        return call

    def step(self, call: Call, event_type: str, state: str, *, attempt: int | None = None,
             kind: str | None = None, worker: str = "w-1", fence: int = 1,
             keep_version: bool = False, **fields: Any) -> None:
        """A CallEvent with the call's next version (RunAborted repeats the current one)."""
        if not keep_version:
            call.version += 1
        intent = call.intent
        at = self._tick()
        self._publish("dispatch", event_type, {
            "run_id": self.run_id, "logical_call_id": call.id,
            "operation_key": intent["operation_key"], "tool_name": intent["tool_name"],
            "tool_version": intent["tool_version"], "principal_id": self.principal_id,
            "tenant_id": self.tenant_id, "policy_version": POLICY_VERSION, "state": state,
            "version": call.version, "worker_id": worker, "fence": fence, "attempt": attempt,
            "attempt_kind": kind, "compensates": intent.get("compensates"),
            "at": at.isoformat(), **fields}, at=at)

    def _receipt(self, call: Call, *, attempt: int, worker: str = "w-1",
                 fence: int = 1) -> dict[str, Any]:
        """The result fields of a success, with its ⚑ ledger.effects event beside it."""
        receipt_id, result = str(uuid.uuid4()), {"debit_id": str(uuid.uuid4()),
                                                 "balance_minor": 6000}
        intent = call.intent
        self._publish("effects", EFFECT_COMMITTED, {
            "run_id": self.run_id, "tenant_id": self.tenant_id, "principal_id": self.principal_id,
            "logical_call_id": call.id, "operation_key": intent["operation_key"],
            "tool_name": intent["tool_name"], "tool_version": intent["tool_version"],
            "arguments_hash": intent["arguments_hash"],
            "canonical_arguments": intent["canonical_arguments"], "policy_version": POLICY_VERSION,
            "worker_id": worker, "fence": fence, "attempt": attempt,
            "downstream_receipt_id": receipt_id, "result": result,
            "compensates": intent.get("compensates"), "committed_at": self._at.isoformat()})
        return {"receipt_id": receipt_id, "result": result}

    def _intent(self, tool: str) -> dict[str, Any]:
        return {"run_id": self.run_id, "provider": "openai.chat",
                "provider_call_id": f"call_{uuid.uuid4().hex[:16]}",
                "logical_call_id": str(uuid.uuid4()),
                "operation_key": f"{self.tenant_id}:caller_stated:{uuid.uuid4().hex}",
                "tool_name": tool, "tool_version": "1", "arguments_hash": uuid.uuid4().hex * 2,
                "canonical_arguments": {"wallet_id": "tenant/acme/w-1", "amount": 4000,
                                        "currency": "EUR"},
                "principal_id": self.principal_id, "tenant_id": self.tenant_id,
                "deadline_at": (self._at + timedelta(hours=1)).isoformat(),
                "run_max_attempts": None}

    def _outcome(self, outcome: str, **fields: Any) -> dict[str, Any]:
        return {"outcome": outcome, "run_id": self.run_id, "provider": "openai.chat",
                "tenant_id": self.tenant_id, "principal_id": self.principal_id, **fields}

    def _capability(self, call: Call, decision: dict, now: datetime) -> dict[str, Any]:
        intent = call.intent
        return {"capability_id": str(uuid.uuid4()), "decision_id": decision["decision_id"],
                **{name: intent[name] for name in ("run_id", "logical_call_id", "operation_key",
                                                   "principal_id", "tenant_id", "tool_name",
                                                   "tool_version", "arguments_hash",
                                                   "deadline_at", "run_max_attempts")},
                "policy_version": POLICY_VERSION, "approvals": [], "limits": {},
                "issued_at": now.isoformat(),
                "expires_at": (now + timedelta(minutes=2)).isoformat(), "signature": "e30..AA"}

    def _publish(self, role: str, kind: str, payload: dict[str, Any],
                 at: datetime | None = None) -> None:
        producer = {"intake": "proposal-intake", "authorizations": "policy"}.get(role, "dispatcher")
        self.events.append(Published(role, Envelope(
            event_id=new_event_id(), event_type=kind, occurred_at=at or self._tick(),
            run_id=self.run_id, producer=producer, correlation_id=self.run_id,
            traceparent=f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01", payload=payload)))

    def _tick(self) -> datetime:
        self._at += timedelta(milliseconds=7)
        return self._at


def mixed_runs(count: int, seed: int = 7) -> list[tuple[RunStory, list[str]]]:
    """``count`` runs of one to three stories each (a saga at most once per run); each with
    the stories told, so a test can say what its run should look like."""
    rng = random.Random(seed)
    runs = []
    for _ in range(count):
        stories = rng.sample(STORIES, rng.randint(1, 3))
        story = RunStory()
        for name in stories:
            story.tell(name)
        runs.append((story, stories))
    return runs


def redelivered(stories: list[str], seed: int, copies: int) -> tuple[RunStory, list[Published]]:
    """A run of these stories, and its events as Kafka may deliver them: with ``copies``
    redeliveries of random ones, all shuffled."""
    story = RunStory()
    for name in stories:
        story.tell(name)
    rng = random.Random(seed)
    delivered = story.events + rng.choices(story.events, k=copies)
    rng.shuffle(delivered)
    return story, delivered


def expected_status(stories: list[str]) -> str:
    """What the projection must say about a run made of these stories."""
    statuses = {EXPECTED_STATUS[name] for name in stories}
    for status in ("needs_attention", "aborted", "running"):
        if status in statuses:
            return status
    return "completed"
