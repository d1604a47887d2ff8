"""Integration tests that seed read-model rows by hand leave none behind (see
tests/support/query_rows.py): the shared event history must stay replayable."""

from __future__ import annotations

import pytest

from tests.support import query_rows


@pytest.fixture(autouse=True)
async def no_seeded_rows_left(request):
    yield
    if query_rows.seeded():
        await query_rows.forget_seeded(request.getfixturevalue("pool"))
