"""Compare-and-swap on the version, behind the legality gate, on a real PostgreSQL row."""

import pytest

from shared.messaging.versioning import Advance, Transitions, VersionedTable, advance
from tests.support.probe import Probe

pytestmark = pytest.mark.infra

SELF_LOOP = Transitions({None: {"seen"}, "seen": {"seen"}})
FORWARD_ONLY = Transitions({None: {"open"}, "open": {"closed"}})


async def _advance(probe: Probe, transitions: Transitions, state: str, version: int) -> Advance:
    async with probe.pool.acquire() as conn, conn.transaction():
        return await advance(conn, VersionedTable(probe.schema, "items"), "x", to_state=state,
                             version=version, transitions=transitions)


async def test_versions_apply_only_onto_their_predecessor_even_on_a_self_loop(pool):
    probe = await Probe(pool, "unused").create()
    outcomes = [await _advance(probe, SELF_LOOP, "seen", v) for v in (1, 3, 2, 2, 1)]
    assert outcomes == [Advance.APPLIED, Advance.ILLEGAL, Advance.APPLIED, Advance.STALE,
                        Advance.STALE]
    assert await probe.fetchval("SELECT version FROM {s}.items WHERE id = 'x'") == 2


async def test_a_forbidden_transition_is_refused_and_changes_nothing(pool):
    probe = await Probe(pool, "unused").create()
    assert await _advance(probe, FORWARD_ONLY, "closed", 1) is Advance.ILLEGAL
    assert await _advance(probe, FORWARD_ONLY, "open", 1) is Advance.APPLIED
    assert await _advance(probe, FORWARD_ONLY, "open", 2) is Advance.ILLEGAL
    row = await probe.fetch("SELECT state, version FROM {s}.items WHERE id = 'x'")
    assert [(r["state"], r["version"]) for r in row] == [("open", 1)]
    assert await _advance(probe, FORWARD_ONLY, "closed", 2) is Advance.APPLIED
