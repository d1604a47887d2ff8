"""The benchmark's statement counter when the server is away at the end of a run: the planning
setting it could not reset is a warning of the run, not an error that hides the run's own."""

from bench.e2e.statements import TRACK_PLANNING, Statements


class _AwayPool:
    def acquire(self):
        raise ConnectionRefusedError(111, "connection refused")


async def test_a_setting_left_on_is_reported_as_a_warning():
    statements = Statements(_AwayPool())  # type: ignore[arg-type]
    statements.tracks_planning = True
    warning = await statements.stop()
    assert warning is not None and TRACK_PLANNING in warning and "refused" in warning
    assert statements.tracks_planning  # still on, as far as anyone can tell


async def test_nothing_to_reset_when_planning_was_never_counted():
    assert await Statements(_AwayPool()).stop() is None  # type: ignore[arg-type]
