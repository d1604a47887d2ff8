"""``intentledger replay [--run ID] [--verify]``: what a person reads, and the exit status."""

from __future__ import annotations

from services.projection.replay import replay
from shared.config import Endpoints
from shared.db.pool import open_pool


async def replay_command(endpoints: Endpoints, run_id: str | None, *, verify: bool) -> int:
    """0 when live and replay agree (or when not verifying); 1 on a difference or a run that
    does not exist."""
    pool = await open_pool(endpoints.database_url, application_name="intentledger-replay",
                           max_size=3)
    try:
        verdict = await replay(pool, [run_id] if run_id else None)
    finally:
        await pool.close()
    print(f"reducer:  {verdict.reducer_version}\n"
          f"replayed: {verdict.events} events, {verdict.runs} runs\n"
          f"live:     {verdict.live_hash}\n"
          f"replay:   {verdict.replayed_hash}")
    if run_id and not verdict.events:
        print(f"no events for run {run_id}")
        return 1
    if not verify:
        return 0
    if verdict.agrees:
        print("verified: the replay equals the live projection")
        return 0
    print(f"MISMATCH: {verdict.difference}")
    return 1
