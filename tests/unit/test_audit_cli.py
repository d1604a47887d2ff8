"""``intentledger audit``'s window: a duration ago or an RFC 3339 time with an offset; anything
else is refused before the downstream is asked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from intentledger.audit_cli import _instant

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("text", "expected"), [
    ("90s", NOW - timedelta(seconds=90)), ("30m", NOW - timedelta(minutes=30)),
    ("2h", NOW - timedelta(hours=2)), ("7d", NOW - timedelta(days=7)),
    ("2026-12-01T00:00:00+01:00", datetime(2026, 11, 30, 23, 0, tzinfo=UTC))])
def test_a_window_edge_is_a_duration_ago_or_a_time_with_an_offset(text, expected):
    assert _instant(text, NOW) == expected


@pytest.mark.parametrize("text", ["2 hours", "-2h", "2026-12-01T00:00:00", "yesterday", ""])
def test_anything_else_is_refused(text):
    with pytest.raises(ValueError, match="a duration ago"):
        _instant(text, NOW)
