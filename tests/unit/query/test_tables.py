"""What a person reads in a terminal: aligned columns and short ages."""

import pytest

from services.query.tables import WIDEST, age, render


def test_columns_are_aligned_and_missing_values_show_as_a_dash():
    text = render([{"run_id": "r-1", "status": "RUNNING"}, {"run_id": "run-long-id", "status": None}],
                  ["run_id", "status"])
    assert text.splitlines() == ["RUN_ID       STATUS",
                                 "r-1          RUNNING",
                                 "run-long-id  -"]


def test_an_empty_listing_says_so_and_long_cells_are_cut():
    assert render([], ["id"]).splitlines() == ["ID", "(none)"]
    cell = render([{"reason": "x" * 500}], ["reason"]).splitlines()[1]
    assert len(cell) == WIDEST and cell.endswith("…")


@pytest.mark.parametrize("seconds, shown", [(7, "7s"), (95, "1m35s"), (7322, "2h02m"),
                                            (3 * 86400 + 7200, "3d02h")])
def test_ages_read_like_a_person_would_say_them(seconds, shown):
    assert age(seconds) == shown
