"""From a record on ``agent.proposals`` to intents and outcomes, in the consumer's transaction.

Who sent a record is established first, from its signature (docs/identity.md): nothing in the
value is trusted before the signature over its exact bytes verifies, and every call the record
carries must then name the signer's principal and tenant. A record refused for its identity
is answered like any refused message (to the run id its body names, without the tenant or
principal it claims) but never reaches ``ledger.intake``: a sender we could not identify writes
nothing into anyone's run history.

Every proposed call gets exactly one answer on its tenant's results topic
``agent.results.<tenant>``, which only that tenant's agents may read: accepted (a new intent,
durable before the answer), duplicate (same operation key, same canonical arguments: the
intent that exists), or rejected with a stable reason code.

A message refused whole is answered on the topic of the tenant its body names, where the agent
that wrote it reads (``reply_tenant``), even when the body lies about it: the answer carries only
what the sender itself sent (its run id, its call ids, its claims) and why it was refused, so
the tenant named learns nothing of anyone else, and the liar cannot read the answer unless it
may read that tenant's topic anyway. Its refusal enters the ledger's history only under a
tenant the sender proved (``recorded_under``): the one its verified signature names, or, for
an unsigned record, the tenant its body names when that tenant accepts unsigned proposals.
Otherwise nothing is written to ``ledger.intake``: a claim is no tenant, and an event put
under a tenant it did not prove would land in that tenant's run of the same id. A refused
signature is answered with its reason code only: the verifier's detail names the key's
principal, which may be another tenant's (it is logged for operators). A body naming no
valid tenant id is answered on the topic of the tenant a verified signature names; with
neither it is dead-lettered, as is a record too broken to answer (not UTF-8, not JSON, no
readable run id): PermanentError.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import ClassVar
from datetime import UTC, datetime, timedelta

from aiokafka import ConsumerRecord

from services.proposal_intake import rates, repository
from shared.contracts.proposals import ReasonCode, ToolCallProposal, proposal_record_id
from services.proposal_intake.domain import Named, intent_of, name_intent
from services.proposal_intake.formats import ProposalRejection, to_proposals
from services.proposal_intake.limits import LimitViolation, check, reply_address
from services.proposal_intake.refusals import recorded_under, reply_tenant
from services.proposal_intake.batch import take_batch
from services.proposal_intake.outcomes import Outcomes, Sink
from services.proposal_intake.run_checks import run_refusal
from services.proposal_intake.settings import IntakeSettings, TenantLimits
from shared.contracts.intake import IntakeReason
from shared.db.unit_of_work import UnitOfWork
from shared.errors import PermanentError
from shared.identity.delegation import Proposer, proposer_of
from shared.identity.principals import PrincipalsWatcher
from shared.identity.signatures import (HEADER, PROPOSAL as SIGNED_PROPOSAL, IdentityReason,
                                        SignatureRefused, SignedBy, verify_record)
from shared.runs import RunKey
from shared.tools import Rejection, ToolRegistry

log = logging.getLogger(__name__)


PROPOSAL = "Proposal"
"""What every record on ``agent.proposals`` is to the routing table: agents send raw JSON in
one of the formats of ``formats.py``, not our envelope, so the decoder names them all so."""


@dataclass(frozen=True)
class RawProposal:
    """An agent's record, identified by the record itself: a redelivered record is a duplicate
    for the inbox, while the same proposal sent again (a new record) is answered as a
    DuplicateProposal through its operation key."""

    event_type: ClassVar[str] = PROPOSAL
    event_id: uuid.UUID
    value: bytes
    traceparent: str | None = None
    """The agent's W3C trace context, from the record's ``traceparent`` header if it sent one."""
    signatures: tuple[bytes, ...] = ()
    """The record's ``intentledger-signature`` headers: one detached JWS over ``value``."""


def decode_raw(record: ConsumerRecord) -> RawProposal:
    value = record.value or b""
    headers = record.headers or ()
    traceparent = next((raw.decode(errors="replace") for name, raw in headers
                        if name == "traceparent"), None)
    return RawProposal(proposal_record_id(record.topic, record.partition, record.offset,
                                          record.timestamp, value), value, traceparent,
                       tuple(raw for name, raw in headers if name == HEADER))


class Intake:
    def __init__(self, registry: ToolRegistry, settings: IntakeSettings,
                 principals: PrincipalsWatcher) -> None:
        self._registry = registry
        self._settings = settings
        self._principals = principals

    async def take(self, uow: UnitOfWork, raw: RawProposal) -> None:
        """One record, statement by statement: the reference ``take_all`` is held to
        (``tests/integration/test_intake_batches.py``)."""
        if (read := self.read(self.outcomes(uow, raw), raw)) is None:
            return
        proposals, proposer = read
        outcomes = self.outcomes(uow, raw, proposer=proposer)
        if (throttled := await rates.spend(
                uow.connection, proposals[0].tenant_id, proposals[0].principal_id,
                len(proposals), self._settings)) is not None:
            outcomes.throttled(proposals, throttled.message, throttled.retry_after_s)
            return
        await self.take_calls(uow, outcomes, proposals, proposer)

    async def take_all(self, uow: UnitOfWork, raws: list[RawProposal]) -> None:
        """A consumed batch in a constant number of statements (``batch.py``)."""
        await take_batch(self, uow, raws, self._settings)

    def outcomes(self, sink: Sink, raw: RawProposal, traceparent: str | None = None,
                 proposer: Proposer | None = None) -> Outcomes:
        """``proposer``: who the record's calls are for, once ``read`` has established it."""
        return Outcomes(sink, raw.event_id, person_id=proposer.person_id if proposer else None,
                        results_family=self._settings.results_family,
                        intake_topic=self._settings.intake_topic, traceparent=traceparent)

    def read(self, outcomes: Outcomes, raw: RawProposal
             ) -> tuple[tuple[ToolCallProposal, ...], Proposer | None] | None:
        """The record's calls and who proposes them; None when the message is refused whole
        (answered through ``outcomes``). Reads no table: identity and shape come first."""
        try:
            signed = self._signer(raw)
            proposer = proposer_of(signed, self._principals.current) if signed else None
        except SignatureRefused as refused:
            log.info("intake: record %s refused %s: %s", raw.event_id, refused.code,
                     refused.message)
            self._refuse_message(outcomes, None, _readable(raw.value, self._settings),
                                 refused.code, f"the record's signature was refused: {refused.code}",
                                 (), identified=False)
            return None
        try:
            document = check(raw.value, self._settings.limits)
        except LimitViolation as violation:
            self._refuse_message(outcomes, signed, violation.document, violation.code,
                                 violation.message, ())
            return None
        try:
            proposals = to_proposals(document, self._settings.limits)
        except ProposalRejection as rejection:
            self._refuse_message(outcomes, signed, document, rejection.code, rejection.message,
                                 rejection.call_ids)
            return None
        if (refusal := self._identity_refusal(signed, proposer, proposals)) is not None:
            self._refuse_message(outcomes, signed, document, *refusal,
                                 tuple(proposal.provider_call_id for proposal in proposals),
                                 identified=False)
            return None
        return (proposals, proposer) if proposals else None

    async def take_calls(self, uow: UnitOfWork, outcomes: Outcomes,
                         proposals: tuple[ToolCallProposal, ...], proposer: Proposer | None) -> None:
        """A read record's calls, each in a savepoint of its own, once its rates are spent."""
        for proposal in proposals:
            await self._take(uow, outcomes, proposal, proposer)

    def name(self, proposal: ToolCallProposal) -> Named:
        """Raises ``shared.tools.Rejection`` when the call names no tool it could be."""
        return name_intent(proposal, self._registry)

    def _signer(self, raw: RawProposal) -> SignedBy | None:
        """Who signed the record; None for an unsigned record while some tenants accept
        those (whether its tenant does is known only once its calls are read)."""
        if not raw.signatures and self._settings.unsigned_tenants:
            return None
        return verify_record(raw.value, raw.signatures, self._principals.current,
                             use=SIGNED_PROPOSAL)

    def _identity_refusal(self, signed: SignedBy | None, proposer: Proposer | None,
                          proposals: tuple[ToolCallProposal, ...]
                          ) -> tuple[IdentityReason, str] | None:
        """Every call must be the proposer's own (the signer's, or the agent a gateway signed
        for: ``shared.identity.delegation``), for the tenant it signed for."""
        for proposal in proposals:
            if signed is None:
                if proposal.tenant_id not in self._settings.unsigned_tenants:
                    return (IdentityReason.SIGNATURE_MISSING,
                            f"the record has no {HEADER} header")
            elif proposer is not None and proposal.principal_id != proposer.principal_id:
                return (IdentityReason.SIGNATURE_PRINCIPAL_MISMATCH,
                        f"call {proposal.provider_call_id} names principal "
                        f"{proposal.principal_id!r}, the record is signed for "
                        f"{proposer.principal_id!r}")
            elif proposal.tenant_id != signed.tenant_id:
                return (IdentityReason.SIGNATURE_TENANT_MISMATCH,
                        f"call {proposal.provider_call_id} names tenant {proposal.tenant_id!r}, "
                        f"the record is signed for {signed.tenant_id!r}")
        return None

    async def _take(self, uow: UnitOfWork, outcomes: Outcomes, proposal: ToolCallProposal,
                    proposer: Proposer | None) -> None:
        try:
            named = self.name(proposal)
        except Rejection as rejection:
            outcomes.rejected(proposal, rejection.code, rejection.message)
            return
        with outcomes.refusing_failures(proposal, named):  # undone to its savepoint first
            async with uow.savepoint():
                await self._record(uow.connection, outcomes, proposal, named, proposer)

    async def _record(self, conn, outcomes: Outcomes, proposal: ToolCallProposal, named,
                      proposer: Proposer | None) -> None:
        if await _answered_by_existing(conn, outcomes, proposal, named):
            return
        run = await repository.run_for_update(conn, RunKey.of(proposal))
        limits = self.run_limits_of(proposal)
        cost = named.tool.cost_of(named.canonical.value)
        person = proposer.person_id if proposer else None
        if (refusal := run_refusal(run, limits, proposal, cost, person)) is not None:
            outcomes.rejected(proposal, *refusal, named)
            return
        if run is None:  # the run starts with an accepted call, never with a refused one
            run = await repository.create_run(conn, proposal, limits, person)
            if (refusal := run_refusal(run, limits, proposal, cost, person)) is not None:
                outcomes.rejected(proposal, *refusal, named)  # created meanwhile by another call
                return
        intent = intent_of(proposal, named, run["deadline_at"], run["max_attempts"], proposer)
        if await repository.insert_intent(conn, intent, cost[0] if cost else 0):
            outcomes.accepted(proposal, intent)
        elif not await _answered_by_existing(conn, outcomes, proposal, named):
            # The key was free when we looked; a concurrent transaction may have taken it since
            # (keys are tenant-wide, runs are locked one by one). Otherwise it is the call id.
            outcomes.rejected(proposal, IntakeReason.PROVIDER_CALL_ID_REUSED,
                              "this provider call id already names another intent in this run", named)

    def _refuse_message(self, outcomes: Outcomes, signed: SignedBy | None, document, code: str,
                        message: str, call_ids: tuple[str, ...], *,
                        identified: bool = True) -> None:
        """A message is refused whole, so every call it carries is answered, not only the ones
        the reason names (a call left unanswered would leave its agent waiting for ever)."""
        address = reply_address(document) if document is not None else None
        if address is None:
            raise PermanentError(f"unanswerable proposal ({code}): {message}")
        tenant = reply_tenant(signed, address)
        if tenant is None:
            raise PermanentError(f"unanswerable proposal ({code}): {message}; and no valid tenant "
                                 f"id to answer to ({ReasonCode.INVALID_TENANT_ID})")
        recorded = (recorded_under(signed, address, self._settings.unsigned_tenants)
                    if identified else None)
        outcomes.rejected_message(tenant, address.run_id, address.call_ids or call_ids, code,
                                  message, recorded_under=recorded)

    def run_limits_of(self, proposal: ToolCallProposal) -> repository.RunLimits:
        """The limits a run starts with (``run_limits``), under its tenant's ceilings."""
        return run_limits(proposal, self._settings.tenant_limits.get(proposal.tenant_id),
                          self._settings, datetime.now(UTC))


def run_limits(proposal: ToolCallProposal, tenant: TenantLimits | None,
               settings: IntakeSettings, now: datetime) -> repository.RunLimits:
    """The tenant's limits (else the intake's defaults) are ceilings: a proposal may state
    lower ones, never higher (a budget of 100,000 calls, a cost limit of 2^53-1 or a deadline
    in the year 9999 is cut down to the ceiling). The attempt budget, unless stated or set,
    is derived from the call budget (``IntakeSettings.attempts_per_call``), so that calls
    that each succeed first time can never exhaust it. A cost limit is the lower of the
    stated and the tenant's in the same currency; in another currency, the tenant's holds."""
    stated = proposal.budget

    def ceiled(name: str, ceiling: int) -> int:
        wanted = getattr(stated, name, None)
        return ceiling if wanted is None else min(wanted, ceiling)

    max_calls = ceiled("max_calls", _first(getattr(tenant, "max_calls", None),
                                           settings.default_max_calls))
    attempts_ceiling = _first(getattr(tenant, "max_attempts", None), settings.default_max_attempts,
                              max_calls * settings.attempts_per_call)
    run_seconds = _first(getattr(tenant, "run_seconds", None), settings.default_run_seconds)
    latest = now + timedelta(seconds=run_seconds)
    cost, currency = getattr(tenant, "cost_limit_minor", None), getattr(tenant, "currency", None)
    if stated is not None and stated.cost_limit_minor is not None and (
            cost is None or stated.currency == currency):
        cost = stated.cost_limit_minor if cost is None else min(cost, stated.cost_limit_minor)
        currency = stated.currency
    return repository.RunLimits(
        deadline_at=min(proposal.deadline_at, latest) if proposal.deadline_at else latest,
        max_calls=max_calls, max_attempts=ceiled("max_attempts", attempts_ceiling),
        cost_limit_minor=cost, currency=currency)


def _first(*values):
    return next((value for value in values if value is not None), None)


def _readable(value: bytes, settings: IntakeSettings):
    """The document of a record refused before it was read, for its reply address only."""
    try:
        return check(value, settings.limits)
    except LimitViolation as violation:
        return violation.document


async def _answered_by_existing(conn, outcomes: Outcomes, proposal: ToolCallProposal, named) -> bool:
    """True when the operation key names an intent already: ``Outcomes.taken`` answers."""
    existing = await repository.call_by_operation_key(conn, named.operation_key)
    if existing is None:
        return False
    outcomes.taken(proposal, named, existing)
    return True
