"""What a person reads in a terminal: aligned columns and short ages."""

import pytest

from services.query.tables import WIDEST, age, render
from shared.terminal import printable


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


@pytest.mark.parametrize("hostile", ["run\nFAKE  SUCCEEDED", "run\r", "\x1b[2J\x1b[Hcleared",
                                     "run-\u202eDEDEECCUS", "zero\u200bwidth", "nel\x85"],
                         ids=["newline", "return", "escape sequence", "bidi override",
                              "zero width", "c1 control"])
def test_a_cell_prints_as_what_it_holds_never_as_terminal_control(hostile):
    """Ids used to print raw to operators' terminals: a newline forged a row, an escape
    sequence rewrote the screen, a bidi override made one id read as another."""
    table = render([{"run_id": hostile, "state": "FAILED"}], ("run_id", "state"))
    assert all(char.isprintable() for char in table.replace("\n", ""))
    assert table.count("\n") == 1  # the header and one row, nothing forged
    assert "\x1b" not in table and "\u202e" not in table


def test_text_in_any_script_is_printed_as_it_is():
    assert printable("注文-7 · commande n°7") == "注文-7 · commande n°7"
    assert printable("a\nb\x1b") == "a\\nb\\x1b"
