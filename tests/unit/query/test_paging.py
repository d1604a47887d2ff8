"""Keyset cursors: opaque, bound to one listing, refused when tampered with."""

import pytest

from services.query.errors import QueryError
from services.query.paging import Keyset, Select

CALLS = Keyset("calls", (("unknown_since", "timestamptz"), ("logical_call_id", "uuid")))
ROWS = [{"unknown_since": f"2026-01-0{day} 00:00:00+00:00", "logical_call_id": f"id-{day}"}
        for day in (1, 2, 3)]


def test_a_full_page_has_a_cursor_after_its_last_row_and_a_short_one_has_none():
    cursor = CALLS.next_cursor(ROWS, limit=2)
    assert CALLS.decode(cursor) == ["2026-01-02 00:00:00+00:00", "id-2"]
    assert CALLS.next_cursor(ROWS, limit=3) is None


def test_the_next_page_starts_strictly_after_the_cursor_in_sort_order():
    select = Select()
    select.where("tenant_id = {}", "acme")
    CALLS.start_after(select, CALLS.next_cursor(ROWS, limit=1))
    assert select.clauses[-1] == ("(unknown_since, logical_call_id) > "
                                  "($2::text::timestamptz, $3::text::uuid)")
    assert select.args == ["acme", "2026-01-01 00:00:00+00:00", "id-1"]
    assert CALLS.order_by() == "ORDER BY unknown_since, logical_call_id"


@pytest.mark.parametrize("cursor", ["", "%%%", "bm90IGpzb24", Keyset("runs", (("run_id", "text"),))
                                    .next_cursor([{"run_id": "a"}, {"run_id": "b"}], 1)])
def test_a_cursor_that_is_not_this_listings_is_refused(cursor):
    with pytest.raises(QueryError) as refused:
        CALLS.decode(cursor)
    assert (refused.value.status, refused.value.code) == (400, "invalid_cursor")


def test_optional_filters_add_nothing_when_empty():
    select = Select()
    for value in (None, [], ()):
        select.where_optional("state = ANY({})", value)
    assert select.sql() == "" and select.args == []
