"""⚑ The fault-protocol format: one JSON document per scenario (``schemas/fault-protocol.schema.json``).

A protocol says what to set up, what an agent proposes, which faults to inject and when, and
which measured facts must hold afterwards. It is data, not code, so a team can write one for
its own tool and run it against its own deployment (``intentledger chaos run FILE``).

Every ``${nonce}`` in ``setup``, ``proposals``, raw records and assertion values is replaced by a
value new to each execution,
so re-running a protocol against the same database is a new set of business intents, never a
duplicate of the last run's. Everything random the runner decides (proposal order within a
step, fault timing jitter) comes from ``seed``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SERVICES = ("relay", "proposal-intake", "policy", "dispatcher", "projection", "wallet",
            "warehouse")
Service = Literal["relay", "proposal-intake", "policy", "dispatcher", "projection", "wallet",
                  "warehouse"]
Name = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Limits(_Strict):
    """Bounds of the runs the scenario starts and of the dispatcher (passed as configuration:
    the intake's run defaults and the dispatcher's settings)."""
    run_seconds: float | None = Field(default=None, gt=0, description=(
        "Each run's deadline, counted from its first proposal (default: the intake's)."))
    run_calls: int | None = Field(default=None, ge=1, description=(
        "Logical calls a run may have; later proposals are refused."))
    run_attempts: int | None = Field(default=None, ge=1, description=(
        "Sends a run may make across all its calls (its attempt budget)."))
    lookups: int | None = Field(default=None, ge=1, description=(
        "Reconciliation budget: unanswered lookups before a call goes to MANUAL_REVIEW."))
    lease_ttl_s: float = Field(default=3.0, gt=0, description=(
        "How long a dead dispatcher keeps its runs before another takes them over."))
    recovery_reserve_s: float | None = Field(default=None, ge=0, description=(
        "Attempts stop this long before the run deadline, leaving time to reconcile."))


class Wallet(_Strict):
    id: str = Field(description="Wallet id, tenant-scoped: tenant/<tenant>/<name>.")
    currency: str = "EUR"
    balance_minor: int = Field(ge=0)


class Stock(_Strict):
    sku: str
    available: int = Field(ge=0)


class Setup(_Strict):
    """State the reference downstreams start from."""
    wallets: list[Wallet] = []
    stock: list[Stock] = []


class CallReached(_Strict):
    """A point in an earlier call's life: its dispatcher state (or any later one), or a number
    of started attempts."""
    call: Name
    state: str | None = Field(default=None, description=(
        "E.g. INTENT_RECORDED, DISPATCHING, SUCCEEDED (a settled state counts for any earlier)."))
    attempts: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _condition(self) -> CallReached:
        if not (self.state or self.attempts):
            raise ValueError("a call point needs a state or attempts")
        return self


class Signer(_Strict):
    principal: str
    tenant: str


class Proposal(_Strict):
    """One tool call as an agent proposes it. Turns are sent in file order, each once the
    intake answered the one before (and ``after`` held)."""
    name: Name = Field(description="How assertions and triggers refer to this call.")
    tool: str = Field(description="Tool name or alias, as the agent's model would write it.")
    arguments: dict[str, Any]
    run: Name = Field(default="main", description=(
        "The run it belongs to, by name; the run id is new per execution."))
    principal: str = "agent-7"
    tenant: str = "acme"
    signed_as: Signer | None = Field(default=None, description=(
        "Sign the record as this principal, for this tenant, instead of as the principal and "
        "tenant the body names: an agent impersonating another (the stack knows the signer "
        "only for the tenants of the proposals it honestly signs)."))
    format: Literal["generic", "openai.chat", "openai.responses", "anthropic"] = "generic"
    message: Name | None = Field(default=None, description=(
        "Proposals naming the same message are sent as one model turn (parallel tool calls); "
        "not for generic."))
    call_id: str | None = Field(default=None, description=(
        "The model provider's tool-call id (default: the name). Providers reuse these across "
        "turns; intentledger never takes them for business identity."))
    operation_key: str | None = Field(default=None, description=(
        "The business intent's key, for tools whose key scheme is caller_stated."))
    after: CallReached | None = Field(default=None, description=(
        "Send only once an earlier call reached this point: an agent that waits for a tool's "
        "result before its next step."))
    after_fault: Name | None = Field(default=None, description=(
        "Send only once this timed fault is over (an outage ended, a paused service resumed)."))


class RawRecord(_Strict):
    """Bytes published as they are, to check that a consumer survives them (a poison message)."""
    name: Name
    topic: str
    value: str = Field(description="The record's value, sent as UTF-8 bytes verbatim.")
    key: str | None = None


class Trigger(_Strict):
    """When a timed fault starts: once ``call`` reached ``state`` or ``attempts``, or else at
    ``moment``; then after ``delay_s`` (plus seeded jitter)."""
    moment: Literal["before_proposals", "after_proposals"] = Field(
        default="after_proposals", description=(
            "Without call: before the first proposal is sent, or once every one was answered."))
    call: Name | None = Field(default=None, description="A proposal's name.")
    state: str | None = Field(default=None, description=(
        "The dispatcher state the call must have reached (e.g. INTENT_RECORDED, DISPATCHING)."))
    attempts: int | None = Field(default=None, ge=1, description=(
        "The number of attempts the call must have started."))
    delay_s: float = Field(default=0.0, ge=0, description="Then wait this long.")
    jitter_s: float = Field(default=0.0, ge=0, description=(
        "Plus a seeded random delay in [0, jitter_s)."))

    @model_validator(mode="after")
    def _call_condition(self) -> Trigger:
        if (self.state or self.attempts) and not self.call:
            raise ValueError("state and attempts need a call")
        if self.call and not (self.state or self.attempts):
            raise ValueError("a call trigger needs a state or attempts")
        return self


class Inject(_Strict):
    """Arm a named fault point (docs/design.md §6) in a service from its start.

    ``exit`` kills the process at the point (its facts are snapshotted under this fault's id,
    then it is restarted unless ``restart`` is false); ``drop`` loses the answer after the work
    was done; ``delay`` stalls there."""
    kind: Literal["inject"]
    id: Name
    service: Service
    point: str
    action: Literal["exit", "drop", "delay"]
    seconds: float | None = Field(default=None, ge=0, description="For delay.")
    hit: int | None = Field(default=1, ge=1, description=(
        "Fire on this hit of the point only; null fires on every hit."))
    restart: bool = Field(default=True, description="For exit: start the service again.")

    @model_validator(mode="after")
    def _delay_seconds(self) -> Inject:
        if (self.action == "delay") != (self.seconds is not None):
            raise ValueError("seconds is required for delay and only for delay")
        return self


class Signal(_Strict):
    """``kill`` (SIGKILL, then a new process after ``for_s``) or ``pause`` (SIGSTOP, SIGCONT
    after ``for_s``) one replica of a service."""
    kind: Literal["kill", "pause"]
    id: Name
    service: Service
    replica: int = Field(default=1, ge=1)
    for_s: float = Field(ge=0)
    when: Trigger = Trigger()


class Outage(_Strict):
    """Stop the Kafka broker or PostgreSQL for ``for_s`` (local infrastructure only)."""
    kind: Literal["outage"]
    id: Name
    target: Literal["kafka", "postgres"]
    for_s: float = Field(ge=0)
    when: Trigger = Trigger()


class Redeliver(_Strict):
    """Publish again, verbatim, every record a topic received since the scenario started:
    the duplicates an outbox or a consumer restart produce."""
    kind: Literal["redeliver"]
    id: Name
    topic: str
    when: Trigger = Trigger()


class Replica(_Strict):
    """Start one more process of a service (it joins the consumer group, competes for leases)."""
    kind: Literal["replica"]
    id: Name
    service: Service
    when: Trigger = Trigger()


class Forge(_Strict):
    """Write an effect request straight into a service's outbox table, with no capability, as
    anyone holding that service's database role can: the relay publishes it like any row. It
    fires once the downstream answered it (on ``effects.receipts``); an answer that is not a
    refusal of its capability is a problem of the scenario: the forgery worked."""
    kind: Literal["forge"]
    id: Name
    outbox: Literal["dispatcher", "policy", "proposal_intake", "projection"] = Field(
        default="dispatcher", description="The schema whose outbox table receives the row.")
    topic: str = Field(description="The effect topic the row names, e.g. effects.wallet.")
    tool: str
    tool_version: str = "1"
    arguments: dict[str, Any] = Field(description="Canonical arguments (money in minor units).")
    operation_key: str
    when: Trigger = Trigger()


class PersonDecision(_Strict):
    """One approval record, as a person's tool publishes it on ``ledger.approvals``."""
    signed_by: str = Field(description="Whose key signs it (a person of the scenario).")
    approver: str | None = Field(default=None, description=(
        "The approver_id the record names; default: the signer. Another name is what one "
        "person claiming a second place in a quorum sends."))
    decision: Literal["granted", "refused"] = "granted"


class Approve(_Strict):
    """People answer a call's approval request, in the order listed, once the policy asked
    for it; it fires when the last decision was published."""
    kind: Literal["approve"]
    id: Name
    call: Name = Field(description="A proposal's name.")
    decisions: list[PersonDecision] = Field(min_length=1)
    when: Trigger = Trigger()


class Tamper(_Strict):
    """Change a downstream's own records behind the ledger's back, as a restore from an old
    backup or a hand-made fix does: ``statement`` runs once on the stack's database with ``$1``
    the operation key of ``call``; then the scenario goes on for ``for_s`` before it may end
    (time for a scheduled audit to look)."""
    kind: Literal["tamper"]
    id: Name
    call: Name = Field(description="A proposal's name: whose operation key is $1.")
    statement: str = Field(description="One SQL statement (a CTE may chain several changes).")
    for_s: float = Field(default=0.0, ge=0)
    when: Trigger = Trigger()


Timed = Signal | Outage | Redeliver | Replica | Forge | Approve | Tamper
"""The faults the runner applies when their trigger comes (an ``Inject`` is armed in a service
instead)."""
Fault = Annotated[Inject | Timed, Field(discriminator="kind")]

CALL_FACTS = ("outcome", "reason", "dispatch_reason", "state", "attempts", "sends", "lookups",
              "business_effects", "events", "result", "receipts", "settled",
              "compensation_state", "compensation_effects", "deadline_slack_s", "logical_call_id",
              "downstream_remembers_key", "audit_findings")
RUN_FACTS = ("run_status", "stop_reason", "projection_hash", "run_events", "rejected_proposals",
             "run_calls", "run_cost_spent_minor", "run_attempts_used")
"""Of one tenant's run (runs are named by tenant and run id): the projection's row and history,
the intake's budget spent (calls, cost) and the dispatcher's (attempts)."""
FAULT_FACTS = ("fault_hits",)
SCENARIO_FACTS = ("calls", "dead_letters", "stale_writes", "retry_amplification",
                  "projection_replay_agrees", "unsettled", "wallet_balance_minor",
                  "stock_available")
Op = Literal["==", "!=", ">=", "<=", ">", "<", "contains", "not_contains", "in", "mentions",
             "not_mentions"]
"""``contains``: an item of a list, a key of an object, a substring of a string; ``mentions``: the
text anywhere in the fact written as JSON (an instruction hidden in a nested field is found)."""


class Assertion(_Strict):
    """``fact`` of a call, a run or the scenario, compared with ``value``.

    ``at`` evaluates the fact as it was when that fault fired (a crash: before the restart).
    ``eventually`` awaits the fact after quiescence: for what quiescence cannot see."""
    fact: Literal[CALL_FACTS + RUN_FACTS + FAULT_FACTS + SCENARIO_FACTS]  # type: ignore[valid-type]
    call: Name | None = None
    run: Name | None = None
    tenant: str | None = Field(default=None, description=(
        "For run facts: whose run of that name. Runs are named by tenant and run id, so "
        "proposals of two tenants naming one run are two runs; required then."))
    fault: Name | None = Field(default=None, description="For fault_hits: an inject fault's id.")
    wallet: str | None = Field(default=None, description="For wallet_balance_minor.")
    sku: str | None = Field(default=None, description="For stock_available.")
    field: str | None = Field(default=None, description=(
        "For result and settled: a dotted path into the object; null means the whole object."))
    at: Name | None = None
    op: Op = "=="
    value: Any
    why: str | None = Field(default=None, description="The guarantee this checks, for the report.")
    eventually: bool = Field(default=False, description=(
        "Measure again until this holds or time_limit_s passes, then judge every assertion on "
        "that later measurement. For an action no position shows as pending, such as a paused "
        "worker's write after it wakes; meant for facts that only grow (a count with >=)."))

    @model_validator(mode="after")
    def _subject(self) -> Assertion:
        if self.eventually and self.at:
            raise ValueError("an assertion at a fault's moment cannot be awaited (eventually)")
        if self.fact in CALL_FACTS and not self.call:
            raise ValueError(f"{self.fact} needs a call")
        if self.fact in RUN_FACTS and not self.run:
            raise ValueError(f"{self.fact} needs a run")
        if self.fact in FAULT_FACTS and not self.fault:
            raise ValueError(f"{self.fact} needs a fault")
        if self.fact == "wallet_balance_minor" and not self.wallet:
            raise ValueError("wallet_balance_minor needs a wallet")
        if self.fact == "stock_available" and not self.sku:
            raise ValueError("stock_available needs a sku")
        return self


class EffectCounter(_Strict):
    """How to count a tool's business effects in the downstream's own records."""
    sql: str = Field(description="A query returning one count; $1 is the operation key.")
    remembered_sql: str | None = Field(default=None, description=(
        "A query returning how many of the downstream's idempotency records hold the operation "
        "key ($1): the call fact downstream_remembers_key (has it forgotten the key?)."))
    database_url: str | None = Field(default=None, description=(
        "The downstream's database (default: the stack's)."))


class ServiceTuning(_Strict):
    env: dict[str, str] = {}


class FaultProtocol(_Strict):
    """A crash scenario: what to set up, propose and break, and what must hold afterwards."""

    name: Name
    guards: str = Field(description="The failure this scenario injects, in one sentence.")
    seed: int
    time_limit_s: float = Field(default=120.0, gt=0, description=(
        "The scenario's own wall-clock limit, proposals to quiescence (the runs' business "
        "deadline is limits.run_seconds)."))
    limits: Limits = Limits()
    setup: Setup = Setup()
    services: dict[Service, ServiceTuning] = Field(default_factory=dict, description=(
        "Extra environment per service (INTENTLEDGER_* settings)."))
    policy_file: str | None = Field(default=None, description=(
        "Policy for this scenario, relative to the protocol file."))
    tools_file: str | None = Field(default=None, description=(
        "Tool registry for this scenario (intake, policy, dispatcher), relative to the file."))
    proposals: list[Proposal] = Field(min_length=1)
    raw_records: list[RawRecord] = []
    faults: list[Fault] = []
    effect_counters: dict[str, EffectCounter] = Field(default_factory=dict, description=(
        "Per tool name; the reference wallet and warehouse tools are built in."))
    allow_unsettled: list[Name] = Field(default=[], description=(
        "Calls allowed to end UNKNOWN, RECONCILING or MANUAL_REVIEW (otherwise a failure)."))
    assertions: list[Assertion] = Field(min_length=1)

    @model_validator(mode="after")
    def _references(self) -> FaultProtocol:
        names = [p.name for p in self.proposals]
        if len(set(names)) != len(names):
            raise ValueError("proposal names must be unique")
        fault_ids = [f.id for f in self.faults]
        if len(set(fault_ids)) != len(fault_ids):
            raise ValueError("fault ids must be unique")
        runs: dict[str, set[str]] = {}
        for proposal in self.proposals:
            runs.setdefault(proposal.run, set()).add(proposal.tenant)
        for item in self.assertions:
            if item.call and item.call not in names:
                raise ValueError(f"assertion names an undeclared call {item.call!r}")
            if item.run and item.run not in runs:
                raise ValueError(f"assertion names an undeclared run {item.run!r}")
            if item.run and item.tenant is None and len(runs[item.run]) > 1:
                raise ValueError(f"run {item.run!r} is proposed in by tenants "
                                 f"{sorted(runs[item.run])}: say whose (tenant)")
            if item.run and item.tenant is not None and item.tenant not in runs[item.run]:
                raise ValueError(f"no proposal of tenant {item.tenant!r} names run {item.run!r}")
            for fault_id in filter(None, (item.at, item.fault)):
                if fault_id not in fault_ids:
                    raise ValueError(f"assertion names unknown fault {fault_id!r}")
        for index, proposal in enumerate(self.proposals):
            if proposal.after and proposal.after.call not in names[:index]:
                raise ValueError(f"{proposal.name} waits for {proposal.after.call!r}, "
                                 "which is not an earlier proposal")
            if proposal.after_fault and proposal.after_fault not in fault_ids:
                raise ValueError(f"{proposal.name} waits for unknown fault {proposal.after_fault!r}")
            if proposal.message and proposal.format == "generic":
                raise ValueError(f"{proposal.name}: the generic format carries no messages")
        for fault in self.faults:
            trigger = getattr(fault, "when", None)
            if trigger and trigger.call and trigger.call not in names:
                raise ValueError(f"fault {fault.id} waits for an undeclared call {trigger.call!r}")
            if isinstance(fault, Approve) and fault.call not in names:
                raise ValueError(f"fault {fault.id} answers an undeclared call {fault.call!r}")
        return self


def load(path: Path) -> FaultProtocol:
    """Read and validate one protocol file; errors name the field and the problem."""
    return FaultProtocol.model_validate(json.loads(path.read_text()))


def substitute(value: Any, nonce: str) -> Any:
    """Replace ``${nonce}`` in every string of a JSON-like value."""
    if isinstance(value, str):
        return value.replace("${nonce}", nonce)
    if isinstance(value, list):
        return [substitute(item, nonce) for item in value]
    if isinstance(value, dict):
        return {key: substitute(item, nonce) for key, item in value.items()}
    return value
