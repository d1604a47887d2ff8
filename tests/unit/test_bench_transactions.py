"""``bench.e2e.transactions.summarise``: PostgreSQL's statement log read back into each
service's transactions, their span, what PostgreSQL spent executing and the gaps between."""

import pytest

from bench.e2e.transactions import MIN_TRANSACTIONS, summarise


def _line(ms: int, backend: int, application: str, duration: float, phase: str, text: str) -> str:
    seconds, millis = divmod(ms, 1000)
    return (f"2026-12-05 23:31:{seconds:02d}.{millis:03d} UTC [{backend}] {application}: LOG:  "
            f"duration: {duration:.3f} ms  {phase}: {text}\n")


def _transaction(start_ms: int, backend: int, application: str = "intentledger-wallet"):
    """BEGIN ending at +0, a statement at +2 (1 ms of it executing), COMMIT at +4 (0.5 ms)."""
    return [
        _line(start_ms, backend, application, 0.1, "statement", "BEGIN;"),
        _line(start_ms + 1, backend, application, 0.2, "parse <unnamed>",
              "INSERT INTO wallet.inbox VALUES ($1, $2)"),
        _line(start_ms + 1, backend, application, 0.1, "bind <unnamed>",
              "INSERT INTO wallet.inbox VALUES ($1, $2)"),
        _line(start_ms + 2, backend, application, 1.0, "execute <unnamed>",
              "INSERT INTO   wallet.inbox\tVALUES ($1, $2)"),
        _line(start_ms + 4, backend, application, 0.5, "statement", "COMMIT;"),
    ]


def test_a_transaction_is_one_backends_begin_to_commit_with_gaps_between_its_statements():
    lines = []
    for i in range(MIN_TRANSACTIONS):
        lines += _transaction(100 * i, backend=7)
        # another backend's transaction interleaved, rolled back: not counted
        lines += [_line(100 * i + 1, 8, "intentledger-wallet", 0.1, "statement", "BEGIN;"),
                  _line(100 * i + 3, 8, "intentledger-wallet", 0.1, "statement", "ROLLBACK;")]
    lines.append("\tcontinuation of a statement's text, skipped\n")

    summary = summarise(lines)

    assert summary["wallet"]["transactions"] == MIN_TRANSACTIONS
    [shape] = summary["wallet"]["shapes"]
    assert shape["count"] == MIN_TRANSACTIONS
    assert shape["span_ms"] == pytest.approx(4.1)  # BEGIN's start (-0.1) to COMMIT's end (+4)
    assert shape["executing_ms"] == pytest.approx(1.6)  # parse and bind are not statements
    assert shape["between_ms"] == pytest.approx(2.5)
    begin, insert, commit = shape["statements"]
    assert begin == {"statement": "BEGIN;", "gap_ms": None, "exec_ms": pytest.approx(0.1)}
    assert insert["statement"] == "INSERT INTO wallet.inbox VALUES ($1, $2)"  # spaces folded
    assert insert["gap_ms"] == pytest.approx(1.0)  # BEGIN ended at 0, the insert began at 1
    assert commit["gap_ms"] == pytest.approx(1.5)


def test_services_are_told_apart_and_rare_shapes_and_other_sessions_left_out():
    lines = []
    for i in range(MIN_TRANSACTIONS):
        lines += _transaction(100 * i, backend=7, application="intentledger-policy")
        lines += _transaction(100 * i + 50, backend=9, application="psql")
    lines += _transaction(5000, backend=7, application="intentledger-dispatcher")

    summary = summarise(lines)

    assert set(summary) == {"policy", "dispatcher"}
    assert summary["policy"]["transactions"] == MIN_TRANSACTIONS
    assert summary["dispatcher"] == {"transactions": 1, "shapes": []}  # seen once: left out
