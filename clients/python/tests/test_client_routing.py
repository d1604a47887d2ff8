"""Answers reach the call that waits for them, and no other: routing by run, provider call id
and the record sent, then by the intent; the latest settled state wins; a timeout never
guesses."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from intentledger_client.contracts import (ProposalOutcome, ToolCallAwaitingApproval,
                                           ToolCallSettled)
from intentledger_client.outcomes import Handle
from intentledger_client.pairing import content
from intentledger_client.routing import Call, Router

RUN, CALL = "run-1", "call_1"
INTENT = uuid.uuid4()


def answer(outcome: str = "accepted", *, run: str = RUN, call: str = CALL,
           proposal: uuid.UUID | None = None, intent: uuid.UUID | None = INTENT,
           **fields: Any) -> bytes:
    event = {"accepted": "ProposalAccepted", "duplicate": "DuplicateProposal",
             "rejected": "ProposalRejected"}[outcome]
    payload = ProposalOutcome(outcome=outcome, run_id=run, call_id=call, proposal_id=proposal,  # type: ignore[arg-type]
                              logical_call_id=intent, **fields)
    return json.dumps({"event_type": event, "payload": payload.model_dump(mode="json")}).encode()


def settled(status: str, *, intent: uuid.UUID = INTENT, **fields: Any) -> bytes:
    payload = ToolCallSettled(run_id=RUN, call_id=CALL, logical_call_id=intent, status=status,  # type: ignore[arg-type]
                              settled_at=datetime.now(UTC), **fields)
    return json.dumps({"event_type": "ToolCallSettled",
                       "payload": payload.model_dump(mode="json")}).encode()


def awaiting(*, intent: uuid.UUID = INTENT) -> bytes:
    now = datetime.now(UTC)
    payload = ToolCallAwaitingApproval(run_id=RUN, call_id=CALL, logical_call_id=intent,
                                       approvals_required=2, requested_at=now, expires_at=now)
    return json.dumps({"event_type": "ToolCallAwaitingApproval",
                       "payload": payload.model_dump(mode="json")}).encode()


def waiting(router: Router, *, settle: bool = True, run: str = RUN) -> tuple[Call, uuid.UUID]:
    call = Call(Handle(tenant_id="acme", run_id=run, call_id=CALL, proposal_id=None), settle=settle)
    router.register(call)
    call.placed(partition=1, offset=35)  # where the partition's end was when it was proposed
    proposal = uuid.uuid4()
    router.sent(call, proposal)
    return call, proposal


def router(duplicates: list[Call] | None = None) -> Router:
    return Router(on_duplicate=(duplicates if duplicates is not None else []).append)


async def test_a_call_waits_past_the_intakes_answer_for_its_settled_result() -> None:
    routes = router()
    call, proposal = waiting(routes)
    routes.route(10, answer(proposal=proposal))
    assert not call.done  # accepted is not a result
    routes.route(11, settled("SUCCEEDED", result={"balance_minor": 8750}))
    outcome = await call.wait(timeout=1)
    assert (outcome.status, outcome.result, outcome.reason_code) == (
        "succeeded", {"balance_minor": 8750}, None)
    assert outcome.handle.logical_call_id == INTENT


async def test_a_late_answer_to_an_earlier_send_with_the_same_call_id_is_not_taken() -> None:
    routes = router()
    call, proposal = waiting(routes)
    routes.route(10, answer("rejected", proposal=uuid.uuid4(), intent=None,
                            reason_code="operation_key_conflict"))
    assert (await call.wait(timeout=0.05)).status == "pending"
    routes.route(11, answer(proposal=proposal))
    routes.route(12, settled("FAILED", reason_code="insufficient_funds"))
    outcome = await call.wait(timeout=1)
    assert (outcome.status, outcome.reason_code) == ("failed", "insufficient_funds")


async def test_an_answer_read_before_the_send_was_acknowledged_is_kept_until_it_is() -> None:
    routes = router()
    call = Call(Handle(tenant_id="acme", run_id=RUN, call_id=CALL, proposal_id=None), settle=True)
    routes.register(call)
    proposal = uuid.uuid4()
    routes.route(10, answer("rejected", proposal=proposal, intent=None, reason_code="unknown_tool"))
    routes.route(11, answer("rejected", proposal=uuid.uuid4(), intent=None, reason_code="other"))
    routes.sent(call, proposal)
    outcome = await call.wait(timeout=1)
    assert (outcome.status, outcome.reason_code) == ("denied", "unknown_tool")


async def test_another_runs_answer_with_the_same_call_id_is_not_this_calls() -> None:
    routes = router()
    call, proposal = waiting(routes)
    routes.route(10, answer(run="run-2", proposal=proposal))
    routes.route(11, settled("SUCCEEDED"))
    assert (await call.wait(timeout=0.05)).status == "pending"


async def test_the_settled_state_read_latest_in_the_log_wins_in_whatever_order_it_is_read() -> None:
    routes = router()
    call, proposal = waiting(routes)
    routes.route(10, answer(proposal=proposal))
    routes.route(20, settled("COMPENSATED", reason_code="saga_compensated"))
    routes.route(12, settled("SUCCEEDED"), only=[call])  # catching up reads older records later
    outcome = await call.wait(timeout=1)
    assert (outcome.status, outcome.ledger_status, outcome.handle.settled_after) == (
        "failed", "COMPENSATED", 20)


async def test_waiting_again_on_a_reported_state_waits_for_a_later_one() -> None:
    routes = router()
    call, proposal = waiting(routes)
    routes.route(10, answer(proposal=proposal))
    routes.route(11, settled("MANUAL_REVIEW", reason_code="reconciliation_exhausted"))
    first = await call.wait(timeout=1)
    assert first.status == "needs_review"
    again = Call(first.handle, settle=True)
    routes.register(again)
    routes.route(11, settled("MANUAL_REVIEW"), only=[again])  # the same record, read again
    assert (await again.wait(timeout=0.05)).status == "pending"
    routes.route(30, settled("SUCCEEDED"))
    assert (await again.wait(timeout=1)).status == "succeeded"


async def test_a_settled_state_read_before_the_intent_was_known_still_settles_it() -> None:
    routes = router()
    call, proposal = waiting(routes)
    routes.route(10, settled("DENIED", reason_code="policy_denied"))
    routes.route(11, answer(proposal=proposal))
    outcome = await call.wait(timeout=1)
    assert (outcome.status, outcome.reason_code) == ("denied", "policy_denied")


async def test_a_duplicate_follows_the_originals_intent_and_asks_to_look_back_once() -> None:
    duplicates: list[Call] = []
    routes = router(duplicates)
    call, proposal = waiting(routes)
    routes.route(40, answer("duplicate", proposal=proposal, state="VALIDATED"))
    assert duplicates == [call] and call.handle.offset == 0
    routes.route(3, settled("SUCCEEDED", result={"ok": True}), only=[call])  # the original's
    assert (await call.wait(timeout=1)).result == {"ok": True}
    routes.route(41, answer("duplicate", proposal=proposal, state="VALIDATED"))  # redelivered
    assert duplicates == [call]


async def test_a_duplicate_on_a_partition_read_from_its_start_looks_back_only_for_another_run(
) -> None:
    """Placed at offset 0 (an empty partition, or a handle resumed from the start), a call is
    offered every record of its run's partition: the original's states on it come anyway. An
    original of another run was answered on another partition, which must be looked back on."""
    duplicates: list[Call] = []
    routes = router(duplicates)
    for run_of_intent in (RUN, "run-0"):
        call = Call(Handle(tenant_id="acme", run_id=RUN, call_id=CALL, proposal_id=None),
                    settle=True)
        routes.register(call)
        call.placed(partition=1, offset=0)
        proposal = uuid.uuid4()
        routes.sent(call, proposal)
        routes.route(2, answer("duplicate", proposal=proposal, state="VALIDATED",
                               intent_run_id=run_of_intent))
        routes.unregister(call)
    assert len(duplicates) == 1 and duplicates[0].handle.intent_run_id == "run-0"


async def test_with_settle_false_the_intakes_answer_is_enough() -> None:
    routes = router()
    call, proposal = waiting(routes, settle=False)
    routes.route(10, answer(proposal=proposal))
    outcome = await call.wait(timeout=1)
    assert (outcome.status, outcome.ledger_status) == ("pending", "accepted")


async def test_an_unanswered_call_is_pending_never_guessed() -> None:
    routes = router()
    call, _ = waiting(routes)
    outcome = await call.wait(timeout=0.05)
    assert (outcome.status, outcome.answer, outcome.settled) == ("pending", None, None)


async def test_a_call_awaiting_approval_says_so_and_its_handle_waits_for_the_settled_state() -> None:
    routes = router()
    call, proposal = waiting(routes)
    routes.route(10, answer(proposal=proposal))
    routes.route(11, awaiting())
    first = await call.wait(timeout=1)
    assert (first.status, first.ledger_status, first.settled) == (
        "awaiting_approval", "AWAITING_APPROVAL", None)
    assert first.approval is not None and first.approval.approvals_required == 2

    again = Call(first.handle, settle=True)  # e.g. after a restart, from the saved handle
    routes.register(again)
    routes.route(11, awaiting())  # read again while catching up: already reported
    assert not again.done
    routes.route(12, settled("SUCCEEDED", result={"balance_minor": 5}))
    later = await again.wait(timeout=1)
    assert (later.status, later.result, later.approval) == ("succeeded", {"balance_minor": 5}, None)


async def test_a_settled_state_is_not_undone_by_an_older_approval_request_read_after_it() -> None:
    routes = router()
    call, proposal = waiting(routes)
    routes.route(10, answer(proposal=proposal))
    routes.route(12, settled("DENIED", reason_code="approval_request_expired"))
    routes.route(11, awaiting())  # a catch-up reading an earlier offset
    outcome = await call.wait(timeout=1)
    assert (outcome.status, outcome.reason_code) == ("denied", "approval_request_expired")


async def test_a_settled_state_stays_when_the_approval_request_is_published_after_it() -> None:
    """The dispatcher announces the settlement and the policy the approval request: the
    policy's record, relayed from its own outbox, can land at a later offset than the
    settlement it preceded.
    Read live and read again from a saved handle, the call stays settled."""
    routes = router()
    call, proposal = waiting(routes)
    routes.route(10, answer(proposal=proposal))
    routes.route(11, settled("SUCCEEDED", result={"balance_minor": 5}))
    routes.route(12, awaiting())
    outcome = await call.wait(timeout=1)
    assert (outcome.status, outcome.result) == ("succeeded", {"balance_minor": 5})

    resumed = Call(Handle(tenant_id="acme", run_id=RUN, call_id=CALL, proposal_id=proposal,
                          logical_call_id=INTENT), settle=True)
    routes.register(resumed)
    for offset, record in ((11, settled("SUCCEEDED", result={"balance_minor": 5})),
                           (12, awaiting())):
        routes.route(offset, record, only=[resumed])
    later = await resumed.wait(timeout=1)
    assert (later.status, later.approval) == ("succeeded", None)


async def test_an_answer_from_a_newer_ledger_with_fields_it_added_is_still_this_calls() -> None:
    routes = router()
    call, proposal = waiting(routes)
    newer = json.loads(answer(proposal=proposal))
    newer["payload"]["added_in_a_later_version"] = {"any": "thing"}
    routes.route(10, json.dumps(newer).encode())
    later = json.loads(settled("SUCCEEDED", result={"balance_minor": 1}))
    later["payload"]["settled_by"] = "a field this client does not know"
    routes.route(11, json.dumps(later).encode())
    outcome = await call.wait(timeout=1)
    assert (outcome.status, outcome.result) == ("succeeded", {"balance_minor": 1})


async def test_a_call_that_stopped_waiting_takes_nothing_more_and_stops_its_re_reads() -> None:
    """A re-read still running for a timed-out call must not bring it back to the router."""
    routes = router()
    call, proposal = waiting(routes)

    async def forever() -> None:
        await asyncio.sleep(3600)
    re_read = asyncio.create_task(forever())
    call.catch_ups.add(re_read)
    routes.unregister(call)
    routes.route(10, answer(proposal=proposal), only=[call])
    routes.route(11, settled("SUCCEEDED"), only=[call])
    assert (call.answer, call.state) == (None, None)
    await asyncio.sleep(0)
    assert re_read.cancelled()


async def test_garbage_on_the_topic_is_nobodys_answer() -> None:
    routes = router()
    call, proposal = waiting(routes)
    for value in (b"", b"not json", b"[1]", b'{"event_type": "ToolCallSettled", "payload": 7}',
                  json.dumps({"event_type": "ToolCallSettled", "payload": {"call_id": CALL}}).encode(),
                  b"[" * 100_000):
        routes.route(1, value)
    routes.route(2, answer(proposal=proposal))
    assert (await call.wait(timeout=0.05)).ledger_status == "accepted"


def test_a_handle_survives_a_round_trip_through_json() -> None:
    handle = Handle(tenant_id="acme", run_id=RUN, call_id=CALL, proposal_id=uuid.uuid4(),
                    logical_call_id=INTENT, operation_key="order-7:debit", partition=2, offset=41,
                    settled_after=40)
    assert Handle.model_validate_json(handle.model_dump_json()) == handle


async def test_a_settled_status_this_client_does_not_know_ends_the_wait_as_needing_review(
        ) -> None:
    """A newer ledger's status must not leave the call (or an MCP task) waiting for ever."""
    routes = router()
    call, proposal = waiting(routes)
    routes.route(10, answer(proposal=proposal))
    newer = json.loads(settled("SUCCEEDED"))
    newer["payload"]["status"] = "PARTIALLY_SUCCEEDED"
    routes.route(11, json.dumps(newer).encode())
    outcome = await call.wait(timeout=1)
    assert (outcome.status, outcome.reason_code) == ("needs_review", "settled_status_unknown")
    assert "whether it took effect is not known" in json.loads(content(outcome))["note"]


async def test_a_settled_state_with_no_status_at_all_is_nobodys_answer() -> None:
    routes = router()
    call, proposal = waiting(routes)
    routes.route(10, answer(proposal=proposal))
    broken = json.loads(settled("SUCCEEDED"))
    del broken["payload"]["status"]
    routes.route(11, json.dumps(broken).encode())
    assert (await call.wait(timeout=0.05)).status == "pending"


def resumed_by(routes: Router, proposer: str, person: str | None = None
               ) -> tuple[Call, uuid.UUID]:
    """A handle read back by a service answering ``proposer`` (for ``person``) about it
    (``Client.wait``'s ``proposer``: the handle's intent is not trusted, so it names none)."""
    proposal = uuid.uuid4()
    call = Call(Handle(tenant_id="acme", run_id=RUN, call_id=CALL, proposal_id=proposal,
                       partition=1, offset=35), settle=True, proposer=proposer, person=person)
    routes.register(call)
    return call, proposal


@pytest.mark.parametrize(("asker", "proposed_by"), [
    (("agent-b", None), ("agent-a", None)),  # another principal
    (("agent-b", "bob"), ("agent-b", "alice")),  # another person behind the same agent
    (("agent-b", "bob"), ("agent-b", None)),  # the agent's own call, for no person
    (("agent-b", None), ("agent-b", "alice")),  # a person's call, asked about by the agent alone
])
async def test_a_call_waiting_for_its_proposers_answer_is_done_and_foreign_on_anothers(
        asker: tuple[str, str | None], proposed_by: tuple[str, str | None]) -> None:
    """``Client.wait(proposer=..., person=...)``: an answer naming another principal, or
    another person, ends the wait at once, and the intent it names is not followed."""
    routes = router()
    call, proposal = resumed_by(routes, *asker)
    routes.route(40, answer(proposal=proposal, principal_id=proposed_by[0],
                            person_id=proposed_by[1]))
    routes.route(41, settled("SUCCEEDED", result={"balance_minor": 4242}))
    outcome = await call.wait(timeout=1)
    assert call.foreign and (outcome.status, outcome.answer, outcome.settled) == (
        "pending", None, None)


async def test_a_call_waiting_for_its_proposers_answer_follows_the_intent_that_answer_names(
        ) -> None:
    routes = router()
    routes.route(39, settled("SUCCEEDED", intent=uuid.uuid4(), result={"balance_minor": 4242}))
    call, proposal = resumed_by(routes, "agent-b", "bob")
    routes.route(40, answer(proposal=proposal, principal_id="agent-b", person_id="bob"))
    routes.route(41, settled("SUCCEEDED", result={"balance_minor": 17}))
    outcome = await call.wait(timeout=1)
    assert not call.foreign and (outcome.status, outcome.result) == (
        "succeeded", {"balance_minor": 17})
    assert outcome.answer is not None and outcome.handle.logical_call_id == INTENT


async def test_an_answer_from_before_persons_were_told_is_judged_by_its_principal_alone(
        ) -> None:
    """A handle of a call answered by an intake that did not yet write ``person_id`` (an
    upgrade): the person's own handle stays readable, as it was before the upgrade."""
    routes = router()
    call, proposal = resumed_by(routes, "agent-b", "bob")
    older = json.loads(answer(proposal=proposal, principal_id="agent-b"))
    del older["payload"]["person_id"]
    routes.route(40, json.dumps(older).encode())
    routes.route(41, settled("SUCCEEDED", result={"balance_minor": 17}))
    outcome = await call.wait(timeout=1)
    assert not call.foreign and (outcome.status, outcome.result) == (
        "succeeded", {"balance_minor": 17})
