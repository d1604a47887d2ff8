"""A dispatcher stage on real Kafka and PostgreSQL: per-test topics, registry and policy files,
signed authorizations published as the policy service would, and the business outcome read
back from the downstream's own tables and the dispatcher's records."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml
from joserfc.jwk import OKPKey

from services.dispatcher import repository as repo
from services.dispatcher.settings import DispatcherSettings
from shared.policy.loader import load_policy
from services.policy.main import run_policy
from services.policy.settings import PolicySettings
from services.relay.main import run_relay
from services.relay.settings import RelaySettings
from services.proposal_intake.settings import IntakeSettings
from shared.db.schemas import migrate_service
from downstreams.wallet.main import run_wallet
from downstreams.wallet.settings import WalletSettings
from shared import capabilities, faults
from shared.config import Endpoints, Settings
from shared.contracts.authorizations import AUTHORIZATION_ALLOWED, Authorization, GrantedApproval
from shared.contracts.intake import PROPOSAL_ACCEPTED, Intent
from shared.messaging.envelope import Envelope
from shared.runs import RunKey
from shared.tools.jcs import jcs
from shared.topology import results_topic
from tests.conftest import ROOT
from tests.support import identities
from tests.support.kafka import create_topic, unique_topic, wait_for

ALLOW_ALL = {"rules": [{"name": "allow-all", "principals": ["*"], "tenants": ["*"], "tools": ["*"],
                        "effect": "allow"}]}
DENY_DEBITS = {"rules": [{"name": "no-debits", "principals": ["*"], "tenants": ["*"],
                          "tools": ["wallet.debit"], "effect": "deny"}, *ALLOW_ALL["rules"]]}


@dataclass
class Stage:
    """Everything one test's dispatcher reads and writes, isolated from other tests."""

    folder: Path
    endpoints: Endpoints
    authorizations: str = field(default_factory=lambda: unique_topic("ledger.authorizations"))
    receipts: str = field(default_factory=lambda: unique_topic("effects.receipts"))
    resolutions: str = field(default_factory=lambda: unique_topic("ledger.resolutions"))
    dispatch: str = field(default_factory=lambda: unique_topic("ledger.dispatch"))
    effects: str = field(default_factory=lambda: unique_topic("ledger.effects"))
    wallet_topic: str = field(default_factory=lambda: unique_topic("effects.wallet"))
    warehouse_topic: str = field(default_factory=lambda: unique_topic("effects.warehouse"))
    proposals: str = field(default_factory=lambda: unique_topic("agent.proposals"))
    results: str = field(default_factory=lambda: unique_topic("agent.results"))
    intake: str = field(default_factory=lambda: unique_topic("ledger.intake"))
    approvals: str = field(default_factory=lambda: unique_topic("ledger.approvals"))
    compensations: str = field(default_factory=lambda: unique_topic("ledger.compensations"))

    def results_topic(self, tenant: str = "acme") -> str:
        """Where this tenant's answers go (``results`` names the family: each tenant has its
        own topic, which the relay creates on first use)."""
        return results_topic(tenant, self.results)

    @property
    def tools_file(self) -> Path:
        return self.folder / "tools.yaml"

    @property
    def policy_file(self) -> Path:
        return self.folder / "policy.yaml"

    def write_registry(self, **overrides: dict) -> None:
        """The example registry on this stage's topics; ``overrides`` per tool name, e.g.
        ``{"wallet.debit": {"reconciliation": "manual"}}`` passed as a dict literal."""
        document = yaml.safe_load((ROOT / "config" / "tools.example.yaml").read_text())
        for tool in document["tools"]:
            tool["topic"] = {"effects.wallet": self.wallet_topic,
                             "effects.warehouse": self.warehouse_topic}.get(tool["topic"],
                                                                           tool["topic"])
            for name, values in overrides.items():
                if tool["name"] == name:
                    tool.update(values)
        self.tools_file.write_text(yaml.safe_dump(document))

    def write_policy(self, document: dict = ALLOW_ALL) -> str:
        self.policy_file.write_text(yaml.safe_dump(document))
        return load_policy(self.policy_file).version

    def dispatcher_settings(self, **overrides) -> DispatcherSettings:
        return DispatcherSettings(**{
            "tools_file": self.tools_file, "policy_file": self.policy_file,
            "authorizations_topic": self.authorizations, "reply_topic": self.receipts,
            "resolutions_topic": self.resolutions, "dispatch_topic": self.dispatch,
            "effects_topic": self.effects, "compensations_topic": self.compensations,
            "results_family": self.results, "policy_reload_interval_s": 0.2, "lease_ttl_s": 3.0,
            "recovery_reserve_s": 1.0, "scan_interval_s": 0.2, "lookup_timeout_s": 3.0,
            **overrides})

    def intake_settings(self, **overrides) -> IntakeSettings:
        """The intake in front of this stage's policy: proposals in, results and intents out."""
        return IntakeSettings(**{
            "tools_file": self.tools_file, "proposals_topic": self.proposals,
            "results_family": self.results, "intake_topic": self.intake, **overrides})

    def policy_settings(self, **overrides) -> PolicySettings:
        """The policy between this stage's intake and dispatcher, reading the same files."""
        return PolicySettings(**{
            "policy_file": self.policy_file, "tools_file": self.tools_file,
            "intake_topic": self.intake, "approvals_topic": self.approvals,
            "authorizations_topic": self.authorizations, "compensations_topic": self.compensations,
            "resolutions_topic": self.resolutions, "results_family": self.results,
            "reload_interval_s": 0.2, **overrides})

    def dispatcher_env(self, **overrides) -> dict[str, str]:
        """The same settings as environment variables, for a dispatcher run as a process."""
        settings = self.dispatcher_settings(**overrides)
        names = ("tools_file", "policy_file", "authorizations_topic", "reply_topic",
                 "resolutions_topic", "dispatch_topic", "effects_topic", "compensations_topic",
                 "results_family", "policy_reload_interval_s", "lease_ttl_s", "recovery_reserve_s",
                 "scan_interval_s", "lookup_timeout_s", *overrides)
        return {f"INTENTLEDGER_DISPATCHER_{name.upper()}": str(getattr(settings, name))
                for name in names}

    async def create_topics(self, *, pipeline: bool = False) -> None:
        """The dispatcher's topics; with ``pipeline`` also the intake's and the policy's."""
        topics = [self.authorizations, self.receipts, self.resolutions, self.dispatch, self.effects,
                  self.compensations, self.wallet_topic, self.warehouse_topic]
        if pipeline:
            topics += [self.proposals, self.approvals]  # tenants' results: by the relay
        topics.append(self.intake)  # what a policy of the stage decides (``accepted``)
        for topic in topics:
            await create_topic(self.endpoints.kafka_bootstrap, topic)


def debit_intent(wallet_id: str, amount_minor: int = 4000, *, run_id: str | None = None,
                 deadline_in: float = 60.0, run_max_attempts: int | None = None,
                 tool: str = "wallet.debit", arguments: dict | None = None) -> Intent:
    key = f"acme:caller_stated:{uuid.uuid4().hex}"
    arguments = arguments or {"wallet_id": wallet_id, "amount": amount_minor, "currency": "EUR"}
    return Intent(
        run_id=run_id or f"run-{uuid.uuid4().hex[:10]}", provider="generic",
        provider_call_id=f"call-{uuid.uuid4().hex[:8]}", logical_call_id=uuid.uuid4(),
        operation_key=key, tool_name=tool, tool_version="1",
        arguments_hash=hashlib.sha256(jcs(arguments)).hexdigest(), canonical_arguments=arguments,
        principal_id="agent-7", tenant_id="acme",
        deadline_at=datetime.now(UTC) + timedelta(seconds=deadline_in),
        run_max_attempts=run_max_attempts)


def unique_suffix() -> str:
    """For run ids of this test run only: a rerun on the same database must not find the leases
    (and fences) an earlier run of the same test left behind."""
    return uuid.uuid4().hex[:10]


async def due_calls(conn, run_id: str, count: int, tenant: str = "acme") -> list[Intent]:
    """``count`` authorized calls of one new run, due now, as the dispatcher's consumer records
    them (no capability: what steps them in these tests does not check one)."""
    intents = [debit_intent("w-batch", run_id=run_id).model_copy(update={"tenant_id": tenant})
               for _ in range(count)]
    await repo.insert_calls(
        conn, [repo.NewCall(intent.model_dump(mode="json"), None, "v1", intent.deadline_at)
               for intent in intents],
        [repo.NewRun(RunKey(tenant, run_id), "agent-7", intents[0].deadline_at, 10)])
    return intents


def authorization(intent: Intent, policy_version: str, *, expires_in: float = 300.0,
                  approvals: tuple[GrantedApproval, ...] = (), signed_for: Intent | None = None,
                  key: OKPKey | None = None) -> Envelope:
    """AuthorizationAllowed as the policy service emits it. ``signed_for`` binds the capability
    to another intent (what a tampered or misrouted authorization looks like); ``key`` signs
    it instead of the policy's (e.g. a key rotated out)."""
    now = datetime.now(UTC)
    bound = signed_for or intent
    claims = {
        "capability_id": str(uuid.uuid4()), "decision_id": str(uuid.uuid4()),
        **bound.model_dump(mode="json", include={"run_id", "logical_call_id", "operation_key",
                                                 "principal_id", "tenant_id", "tool_name",
                                                 "tool_version", "arguments_hash", "deadline_at",
                                                 "run_max_attempts"}),
        "policy_version": policy_version,
        "approvals": [approval.model_dump(mode="json") for approval in approvals],
        "limits": {}, "issued_at": now.isoformat(),
        "expires_at": (now + timedelta(seconds=expires_in)).isoformat()}
    capability = capabilities.sign(claims, key or identities.capability_key())
    payload = Authorization(intent=intent, decision_id=capability.decision_id,
                            policy_version=policy_version, rule="test", capability=capability)
    return Envelope.new(event_type=AUTHORIZATION_ALLOWED, run_id=intent.run_id, producer="policy",
                        payload=payload.model_dump(mode="json"))


def accepted(intent: Intent) -> Envelope:
    """ProposalAccepted as the intake emits it: the intent, for the stage's policy to decide."""
    return Envelope.new(event_type=PROPOSAL_ACCEPTED, run_id=intent.run_id,
                        producer="proposal-intake", payload=intent.model_dump(mode="json"))


@asynccontextmanager
async def running_policy_on(stage: Stage) -> AsyncIterator[None]:
    """The real policy service on the stage's topics, and a relay for its outbox: what decides
    the intents ``accepted`` sends and the compensations the dispatcher proposes."""
    stopping = asyncio.Event()
    settings = Settings(kafka_bootstrap=stage.endpoints.kafka_bootstrap,
                        database_url=stage.endpoints.database_url)
    tasks = [asyncio.create_task(run_policy(settings, stage.policy_settings(), stopping)),
             asyncio.create_task(run_relay(settings, RelaySettings(
                 schemas=["policy"], poll_interval_s=0.2), stopping))]
    try:
        yield
    finally:
        stopping.set()
        await asyncio.gather(*tasks)


@asynccontextmanager
async def dispatcher_stage(pool, endpoints: Endpoints, folder: Path) -> AsyncIterator[Stage]:
    """A migrated, parked stage with the example registry and an allow-all policy; the fault
    rules an in-process wallet set are cleared when the test ends."""
    for schema in ("dispatcher", "policy", "wallet", "warehouse"):
        await migrate_service(pool, schema)
    stage = Stage(folder, endpoints)
    stage.write_registry()
    stage.write_policy()
    await stage.create_topics()
    await park_other_tests_calls(pool)
    try:
        yield stage
    finally:
        faults.configure("")


async def park_other_tests_calls(pool) -> None:
    """Tests share one dispatcher and one policy schema, as one deployment would; a call an
    earlier test left unfinished (its services stopped mid-way) must not be picked up by this
    test's dispatcher, nor its approval request, once lapsed, be denied by this test's policy
    sweep: the denial would go out on this test's topics, and tell another test's call's
    denial on this test's results topic. A call left in line for its tool's slots
    leaves the line too: this test's sends would wait behind it, and admit it."""
    await pool.execute("UPDATE dispatcher.calls SET next_action_at = NULL, capacity = NULL"
                       " WHERE next_action_at IS NOT NULL OR capacity IS NOT NULL")
    await pool.execute("UPDATE policy.decisions SET expires_at = 'infinity'"
                       " WHERE outcome = 'awaiting_approval'")


async def call_state(pool, logical_call_id: uuid.UUID) -> str | None:
    return await pool.fetchval("SELECT state FROM dispatcher.calls WHERE logical_call_id = $1",
                               logical_call_id)


async def settled(pool, logical_call_id: uuid.UUID, timeout: float = 60.0,
                  states: tuple[str, ...] = ("SUCCEEDED", "FAILED", "MANUAL_REVIEW", "DENIED",
                                             "EXPIRED", "COMPENSATED", "COMPENSATION_FAILED")) -> str | None:
    async def state():
        value = await call_state(pool, logical_call_id)
        return value if value in states else None
    return await wait_for(state, timeout=timeout)


async def attempts(pool, logical_call_id: uuid.UUID) -> list[dict]:
    rows = await pool.fetch("SELECT attempt, kind, fence, worker_id, status, detail, started_at,"
                            " deadline_at, finished_at FROM dispatcher.attempts"
                            " WHERE logical_call_id = $1 ORDER BY attempt", logical_call_id)
    return [dict(row) for row in rows]


async def call_row(pool, logical_call_id: uuid.UUID) -> dict:
    return dict(await pool.fetchrow("SELECT * FROM dispatcher.calls WHERE logical_call_id = $1",
                                    logical_call_id))


@asynccontextmanager
async def running_wallet_on(stage: Stage, **wallet_overrides) -> AsyncIterator[None]:
    """The reference wallet in this event loop, on the stage's request topic."""
    import asyncio

    stopping = asyncio.Event()
    settings = Settings(kafka_bootstrap=stage.endpoints.kafka_bootstrap,
                        database_url=stage.endpoints.database_url)
    wallet = WalletSettings(request_topic=stage.wallet_topic, reply_topic=stage.receipts,
                            **wallet_overrides)
    task = asyncio.create_task(run_wallet(settings, wallet, stopping))
    try:
        if wallet.http_port is not None:
            assert await wait_for(lambda: _answers(wallet.http_port), timeout=60), "wallet HTTP down"
        yield
    finally:
        stopping.set()
        await task


@asynccontextmanager
async def running_warehouse_on(stage: Stage, **overrides) -> AsyncIterator[None]:
    import asyncio

    from downstreams.warehouse.main import run_warehouse
    from downstreams.warehouse.settings import WarehouseSettings

    stopping = asyncio.Event()
    settings = Settings(kafka_bootstrap=stage.endpoints.kafka_bootstrap,
                        database_url=stage.endpoints.database_url)
    warehouse = WarehouseSettings(request_topic=stage.warehouse_topic, reply_topic=stage.receipts,
                                  **overrides)
    task = asyncio.create_task(run_warehouse(settings, warehouse, stopping))
    try:
        yield
    finally:
        stopping.set()
        await task


async def _answers(port: int) -> bool:
    import aiohttp

    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/healthz") as response:
                return response.status == 200
    except aiohttp.ClientError:
        return False
