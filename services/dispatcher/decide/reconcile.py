"""Phase reconcile: an UNKNOWN outcome leaves only through evidence (docs/design.md §4).

Evidence is a lookup by the operation key, a replay under the same key where the tool
deduplicates (while the downstream still remembers the key), or a person. A lookup backs off
and respects the dependency's breaker, so a downstream that is down does not exhaust the
reconciliation budget in a second.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from services.dispatcher.decide import forward, settle
from services.dispatcher.decide.actions import Action, Postpone
from services.dispatcher.decide.situation import Situation
from services.dispatcher.repository import Attempt
from shared.contracts.dispatch import CallState as S, DispatchReason


def reconcile(step: Situation) -> list[Action]:
    tool, call, settings = step.tool, step.call, step.settings
    if tool.reconciliation == "manual":
        return settle.manual(step, DispatchReason.NO_RECONCILIATION_PATH,
                             "the tool offers neither a lookup nor a safe replay")
    if tool.reconciliation == "lookup_by_key":
        if call.lookups >= settings.max_lookups:
            return settle.manual(step, DispatchReason.RECONCILIATION_BUDGET_EXHAUSTED,
                                 f"{call.lookups} lookups went unanswered")
        if (wait_until := lookup_not_before(step)) is not None:
            return [Postpone(wait_until)]
        deadline = step.now + timedelta(seconds=settings.lookup_timeout_s)
        return forward.start_attempt(step, "lookup", deadline, S.RECONCILING)
    if not tool.retry.replay_safe:
        return settle.manual(step, DispatchReason.NO_RECONCILIATION_PATH,
                             "the tool does not deduplicate a resend")
    if (why_not := forgotten(step, first_send(step))) is not None:
        return settle.manual(step, DispatchReason.DOWNSTREAM_KEY_EXPIRED, why_not)
    return forward.send(step, to=S.RECONCILING)


def lookup_not_before(step: Situation) -> datetime | None:
    """Lookups back off (1, 2, 4 … × the base, from the last one's end) and wait for the
    dependency's breaker."""
    lookups = [attempt for attempt in step.attempts if attempt.kind == "lookup"]
    not_before = step.now
    if lookups:
        last = lookups[-1]
        pause = step.settings.lookup_backoff_s * 2 ** (len(lookups) - 1)
        not_before = (last.finished_at or last.deadline_at) + timedelta(seconds=pause)
    closed_at = step.judges.breakers.closed_at(step.dependency, step.now)
    later = max(not_before, closed_at or step.now)
    return later if later > step.now else None


def first_send(step: Situation) -> Attempt:
    return next(attempt for attempt in step.attempts if attempt.kind == "send")


def forgotten(step: Situation, first: Attempt) -> str | None:
    """Why a resend under the key could be a new effect, and a "not found" could be the
    downstream's forgetting rather than its answer (it may have forgotten the key by the time
    the request arrives), or None. A tool that declares no retention keeps keys for ever."""
    retry = step.tool.retry
    if retry.key_retention_seconds is None:
        return None
    remembered_until = first.started_at + timedelta(seconds=retry.key_retention_seconds)
    if step.now + timedelta(seconds=retry.attempt_timeout_seconds) >= remembered_until:
        return (f"the downstream forgets the key at {remembered_until.isoformat()}: a resend "
                "could apply the effect again")
    return None


def after_reconciliation(step: Situation) -> list[Action]:
    latest = step.latest
    if latest.status is None:
        finished = forward.unanswerable(step, latest)
        if isinstance(finished, Postpone):
            return [finished]
        return [finished, *reconcile(forward.with_finished(step, finished))]
    if latest.status == "applied":
        return settle.succeed(step, latest, reconciled=True)
    if latest.status == "rejected":
        return settle.fail(step, latest, DispatchReason.REJECTED_BY_TOOL,
                           f"reconciled: {(latest.receipt or {}).get('reason')}", reconciled=True)
    if latest.status == "not_found":  # confirmed: nothing was applied under the key
        if (why := forgotten(step, first_send(step))) is not None:
            return settle.manual(step, DispatchReason.DOWNSTREAM_KEY_EXPIRED,
                                 f"not found, but {why}")
        return forward.send(step, to=S.DISPATCHING)
    return reconcile(step)  # unknown, stale, refused, transient: no evidence yet
