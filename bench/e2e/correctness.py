"""The end-of-run checks, from the records that own each fact: every proposal accepted once and
in exactly one terminal state (dispatcher and projection agree), one wallet debit per succeeded
operation key and none for anything else, every balance equal to its opening balance minus its
debits plus its refunds, nothing dead-lettered or parked, the agent told. A lost or duplicated
effect fails the run, whatever its speed."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from bench.e2e.names import RunNames
from bench.e2e.pipeline import EXPECTED_DEBITS, OUTBOX_SCHEMAS, TERMINAL
from bench.e2e.proposals import Proposals
from bench.e2e.startup import OPENING_BALANCE_MINOR
from intentledger.chaos.stack import Stack


@dataclass
class Ledger:
    """What the ledger's own tables say about this run's calls."""
    intake: asyncpg.Record
    dispatcher_states: dict[str, int]
    compensations: int
    projection_states: dict[str, int]
    disagree: int
    not_at_dispatcher: int
    effects: list[asyncpg.Record]
    orphans: int
    balances: int
    attempts: dict[str, int]
    dispatched: int
    replayed: int
    stale: int
    set_aside: list[str]
    events: int


async def check_correctness(pool: asyncpg.Pool, names: RunNames, proposals: Proposals, *,
                            send_errors: list[str], drained: dict[str, Any], drain_s: float,
                            started_at: datetime) -> dict[str, Any]:
    async with pool.acquire() as conn:
        ledger = await _read_ledger(conn, names, started_at)
    published = len(proposals)
    failures = _failures(ledger, proposals, send_errors, drained, drain_s)
    effects, attempts, dispatched = ledger.effects, ledger.attempts, ledger.dispatched
    sends, lookups = attempts.get("send", 0), attempts.get("lookup", 0)
    return {
        "passed": not failures, "failures": failures, "drain": drained,
        "proposals_published": published, "accepted_answers": proposals.accepted,
        "answers_on_agent_results": dict(proposals.answers),
        "intake_intents": ledger.intake["calls"],
        "distinct_operation_keys": ledger.intake["keys"],
        "dispatcher_states": ledger.dispatcher_states,
        "projection_states": ledger.projection_states, "compensations": ledger.compensations,
        "projection_disagrees": ledger.disagree,
        "wallet_debits_per_call": [dict(r) for r in effects],
        "calls_with_exactly_one_debit": sum(r["calls"] for r in effects if r["debits"] == 1),
        "succeeded_calls": ledger.dispatcher_states.get("SUCCEEDED", 0),
        "orphan_debits": ledger.orphans,
        "wallets_out_of_balance": ledger.balances,
        "attempts": {"send": sends, "lookup": lookups},
        "retry_amplification": round((sends + lookups) / dispatched, 4) if dispatched else None,
        "sends_per_dispatched_call": round(sends / dispatched, 4) if dispatched else None,
        "settled_announcements_repeated": sum(1 for n in proposals.settled_count if n > 1),
        "duplicates_prevented": {"replayed_receipts": ledger.replayed,
                                 "stale_writes_refused": ledger.stale},
        "set_aside": ledger.set_aside, "ledger_events_published": ledger.events,
        "ledger_events_per_proposal": round(ledger.events / published, 2) if published else None,
    }


async def _read_ledger(conn: asyncpg.Connection, names: RunNames,
                       started_at: datetime) -> Ledger:
    runs, wallets = names.runs_like, names.wallets_like
    intake = await conn.fetchrow(
        "SELECT count(*) AS calls, count(DISTINCT operation_key) AS keys,"
        " count(DISTINCT (run_id, provider_call_id)) AS proposals"
        " FROM proposal_intake.logical_calls WHERE run_id LIKE $1", runs)
    dispatcher_states = dict(await conn.fetch(
        "SELECT state, count(*) FROM dispatcher.calls WHERE run_id LIKE $1"
        " AND compensates IS NULL GROUP BY state", runs))
    compensations = await conn.fetchval(
        "SELECT count(*) FROM dispatcher.calls WHERE run_id LIKE $1"
        " AND compensates IS NOT NULL", runs)
    projection_states = dict(await conn.fetch(
        "SELECT state, count(*) FROM projection.calls WHERE run_id LIKE $1"
        " AND compensates IS NULL GROUP BY state", runs))
    disagree = await conn.fetchval(
        "SELECT count(*) FROM dispatcher.calls d LEFT JOIN projection.calls p"
        " USING (logical_call_id) WHERE d.run_id LIKE $1"
        " AND p.state IS DISTINCT FROM d.state", runs)
    not_at_dispatcher = await conn.fetchval(
        "SELECT count(*) FROM proposal_intake.logical_calls lc WHERE lc.run_id LIKE $1"
        " AND NOT EXISTS (SELECT 1 FROM dispatcher.calls d"
        "                 WHERE d.logical_call_id = lc.logical_call_id)", runs)
    effects = await conn.fetch(
        "SELECT c.state, coalesce(d.n, 0) AS debits, count(*) AS calls"
        " FROM dispatcher.calls c LEFT JOIN (SELECT operation_key, count(*) AS n"
        "   FROM wallet.debits WHERE wallet_id LIKE $2 GROUP BY operation_key) d"
        "   USING (operation_key)"
        " WHERE c.run_id LIKE $1 AND c.compensates IS NULL GROUP BY 1, 2",
        runs, wallets)
    orphans = await conn.fetchval(
        "SELECT count(*) FROM wallet.debits w WHERE w.wallet_id LIKE $1 AND NOT EXISTS"
        " (SELECT 1 FROM dispatcher.calls c WHERE c.operation_key = w.operation_key)",
        wallets)
    balances = await conn.fetchval(
        # Summed once for the run's wallets: neither table has an index by wallet, and a
        # subquery per wallet would scan every debit of every earlier run a thousand times.
        "SELECT count(*) FROM wallet.wallets w"
        " LEFT JOIN (SELECT wallet_id, sum(amount_minor) AS total FROM wallet.debits"
        "            WHERE wallet_id LIKE $1 GROUP BY wallet_id) d ON d.wallet_id = w.id"
        " LEFT JOIN (SELECT wallet_id, sum(amount_minor) AS total FROM wallet.refunds"
        "            WHERE wallet_id LIKE $1 GROUP BY wallet_id) r ON r.wallet_id = w.id"
        " WHERE w.id LIKE $1"
        " AND w.balance_minor <> $2 - coalesce(d.total, 0) + coalesce(r.total, 0)",
        wallets, OPENING_BALANCE_MINOR)
    attempts = dict(await conn.fetch(
        "SELECT a.kind, count(*) FROM dispatcher.attempts a JOIN dispatcher.calls c"
        " USING (logical_call_id) WHERE c.run_id LIKE $1 GROUP BY a.kind", runs))
    dispatched = await conn.fetchval(
        "SELECT count(DISTINCT a.logical_call_id) FROM dispatcher.attempts a"
        " JOIN dispatcher.calls c USING (logical_call_id) WHERE c.run_id LIKE $1", runs)
    replayed = await conn.fetchval(
        "SELECT count(*) FROM dispatcher.attempts a JOIN dispatcher.calls c"
        " USING (logical_call_id) WHERE c.run_id LIKE $1"
        " AND (a.receipt ->> 'replayed')::boolean", runs)
    stale = await conn.fetchval(
        "SELECT count(*) FROM dispatcher.stale_writes WHERE run_id LIKE $1", runs)
    set_aside = []
    for schema in OUTBOX_SCHEMAS:
        set_aside += [f"dead letter in {schema}: {r['consumer']} {r['topic']}: {r['reason']}"
                      for r in await conn.fetch(
                          f'SELECT consumer, topic, reason FROM "{schema}".dead_letters'
                          " WHERE created_at >= $1", started_at)]
        set_aside += [f"parked in {schema}: {r['topic']}: {r['park_reason']}"
                      for r in await conn.fetch(
                          f'SELECT topic, park_reason FROM "{schema}".outbox'
                          " WHERE status = 'parked' AND created_at >= $1", started_at)]
    events = 0
    for schema in OUTBOX_SCHEMAS:
        events += await conn.fetchval(f'SELECT count(*) FROM "{schema}".outbox'
                                      " WHERE partition_key LIKE $1", runs)
    return Ledger(intake, dispatcher_states, compensations, projection_states, disagree,
                  not_at_dispatcher, effects, orphans, balances, attempts, dispatched, replayed,
                  stale, set_aside, events)


def _failures(ledger: Ledger, proposals: Proposals, send_errors: list[str],
              drained: dict[str, Any], drain_s: float) -> list[str]:
    published = len(proposals)
    intake = ledger.intake
    wrong_effects = [{"state": r["state"], "debits": r["debits"], "calls": r["calls"]}
                     for r in ledger.effects
                     if r["debits"] != EXPECTED_DEBITS.get(r["state"], -1)
                     and not (r["state"] == "MANUAL_REVIEW" and r["debits"] <= 1)]
    unsettled = {state: n for state, n in ledger.dispatcher_states.items()
                 if state not in TERMINAL}
    unanswered = published - proposals.accepted
    not_settled = published - proposals.settled
    contradictory = sum(1 for statuses in proposals.settled_statuses.values()
                        if len(statuses - {"SUCCEEDED", "COMPENSATED"}) and len(statuses) > 1)
    client_told_otherwise = told_otherwise(proposals)
    answers = proposals.answers
    failures = []
    if not drained["drained"]:
        failures.append(f"not drained within {drain_s:.0f} s: {drained['last_look']}")
    if intake["proposals"] != published:
        failures.append(f"{published} proposals published, {intake['proposals']} known to "
                        "the intake (lost or extra proposals)")
    if intake["keys"] != intake["calls"]:
        failures.append(f"{intake['calls']} intents but {intake['keys']} operation keys")
    if unanswered:
        failures.append(f"{unanswered} proposals without ProposalAccepted on their tenant's "
                        "results topic")
    if answers["rejected"] or answers["duplicate"]:
        failures.append(f"{answers['rejected']} rejected and {answers['duplicate']} "
                        "duplicate answers to proposals that were all new and valid")
    if answers["wrong_tenant"]:
        failures.append(f"{answers['wrong_tenant']} answers on another tenant's results topic "
                        "than their proposal's")
    if ledger.not_at_dispatcher:
        failures.append(f"{ledger.not_at_dispatcher} accepted calls never reached the dispatcher")
    if unsettled:
        failures.append(f"calls not in a terminal state: {unsettled}")
    if ledger.disagree:
        failures.append(f"{ledger.disagree} calls whose projection state differs from the "
                        "dispatcher's")
    if wrong_effects:
        failures.append(f"wallet debits per operation key not as the state says: {wrong_effects}")
    if ledger.orphans:
        failures.append(f"{ledger.orphans} debits of the benchmark's wallets belong to no call")
    if ledger.balances:
        failures.append(f"{ledger.balances} wallets whose balance is not opening - debits + "
                        "refunds")
    if not_settled:
        failures.append(f"{not_settled} proposals never got a ToolCallSettled")
    if contradictory:
        failures.append(f"{contradictory} calls announced with contradicting statuses")
    if ledger.set_aside:
        failures.append(f"records set aside: {ledger.set_aside[:10]}")
    if send_errors:
        failures.append(f"{len(send_errors)} proposals failed to publish: {send_errors[:3]}")
    if client_told_otherwise:
        i = client_told_otherwise[0]
        failures.append(f"{len(client_told_otherwise)} client calls returned pending or a "
                        f"status other than their call's (e.g. proposal {i}: "
                        f"{proposals.client_status[i]}, settled {proposals.status[i]})")
    return failures


def told_otherwise(proposals: Proposals) -> list[int]:
    """The proposals sent through the client whose call returned ``pending`` (not settled in
    its wait) or a status other than the one their call settled in."""
    return sorted(i for i, status in proposals.client_status.items()
                  if status == "pending"
                  or (status == "succeeded") != (proposals.status[i] == "SUCCEEDED"))


def consumer_totals(stack: Stack) -> dict[str, Any]:
    """Each consumer's committed totals, from the line it logs when it stops:
    ``BatchReport(applied=..., duplicates=..., dead_lettered=[...])``."""
    totals: dict[str, Any] = {}
    pattern = re.compile(r"stopped: BatchReport\(applied=(\d+), duplicates=(\d+)")
    for replica in stack.replicas.values():
        if not replica.log_path.exists():
            continue
        found = pattern.findall(replica.log_path.read_text(errors="replace"))
        if found:
            applied, duplicates = found[-1]
            totals[f"inbox_{replica.label}"] = {"applied": int(applied),
                                                "duplicates": int(duplicates)}
    return totals
