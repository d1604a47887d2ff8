"""``python -m bench.e2e --compare REF``: an A/B of this tree against another commit, in one
sitting, so a change is kept only when it wins against its own baseline on the same noisy
machine.

The two sides alternate (A B, then B A, …: neither always runs first, on a cooler or warmer
machine), each run on fresh Kafka and PostgreSQL data directories of its own home, stopped and
purged after it. REF runs from a detached git worktree with this tree's virtualenv (its
dependencies must match); B from a copy of this tree taken when the A/B starts, so that an edit
made while it runs cannot reach B's later rounds. Every other argument goes to both sides
unchanged. The report,
``compare.json`` beside each run's own directory, gives per figure each run's value and the
median ratio B/A (B: this tree), so a change reads as "0.81× the statements".
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from shared import infra
from shared.config import Settings

ROOT = Path(__file__).resolve().parents[2]
HEADLINES = ("sustained_proposals_per_s", "p50_ms", "p99_ms", "client_p50_ms", "client_p99_ms",
             "proposals_per_cpu_s", "pace_ms")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e --compare")
    parser.add_argument("--compare", required=True, metavar="REF",
                        help="the commit (or branch, tag) to compare this tree against")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each side (default 2)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "compare")
    args, bench_args = parser.parse_known_args(argv)
    args.out = args.out.resolve()  # each side runs in its own tree: a relative path differs
    with tempfile.TemporaryDirectory(prefix="intentledger-compare-") as scratch:
        ref_tree, this_tree = Path(scratch) / "ref", Path(scratch) / "this"
        this = _snapshot(this_tree)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(ref_tree),
                        args.compare], check=True, capture_output=True)
        try:
            results = {"A": [], "B": []}
            for round_ in range(args.rounds):
                for side in ("AB" if round_ % 2 == 0 else "BA"):
                    tree = ref_tree if side == "A" else this_tree
                    out = args.out / f"{side}{round_ + 1}"
                    results[side].append(_run(tree, out, bench_args, Path(scratch) / "home"))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(ref_tree)], check=False, capture_output=True)
    report = compare(results, ref=args.compare, this=this, bench_args=bench_args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compare.json").write_text(json.dumps(report, indent=2) + "\n")
    _print(report)
    return 0 if all(r["passed"] for side in results.values() for r in side) else 1


def _snapshot(into: Path) -> str:
    """Copy this tree's files as git sees them (tracked and untracked, not ignored) ``into``;
    returns what B is: HEAD's commit, and whether the tree differed from it."""
    def git(*arguments: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *arguments], check=True,
                              capture_output=True, text=True).stdout

    for name in git("ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0"):
        if name and (ROOT / name).is_file():  # a tracked file deleted in the tree is left out
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, into / name)
    head = git("rev-parse", "--short", "HEAD").strip()
    return f"this tree ({head}{', with changes not committed' if git('status', '--porcelain') else ''})"


def _run(tree: Path, out: Path, bench_args: list[str], home: Path) -> dict[str, Any]:
    """One benchmark run of ``tree`` on a home of its own, purged afterwards."""
    settings = Settings(home=home, kafka_bootstrap=None, database_url=None)
    env = {**os.environ, "INTENTLEDGER_HOME": str(home)}
    for name in ("INTENTLEDGER_KAFKA_BOOTSTRAP", "INTENTLEDGER_DATABASE_URL"):
        env.pop(name, None)  # each run starts its own, fresh
    try:
        subprocess.run([sys.executable, "-m", "bench.e2e", *bench_args, "--out", str(out)],
                       cwd=tree, env=env, check=False)
    finally:
        infra.down(settings, purge=True)
    return json.loads((out / "e2e.json").read_text())


def compare(results: dict[str, list[dict[str, Any]]], *, ref: str, bench_args: list[str],
            this: str = "this tree") -> dict[str, Any]:
    """Per figure: the runs' values on each side and the median of B over the median of A."""
    figures: dict[str, dict[str, Any]] = {}
    for name in HEADLINES:
        figures[name] = _figure([r.get(name) for r in results["A"]],
                                [r.get(name) for r in results["B"]])
    for name in _budget_lines(results):
        figures[f"at {name[0]}/s: {name[1]}"] = _figure(
            [_budget(r, *name) for r in results["A"]], [_budget(r, *name) for r in results["B"]])
    return {"a": ref, "b": this, "bench_args": bench_args,
            "passed": {side: [r["passed"] for r in runs] for side, runs in results.items()},
            "figures": figures}


def _budget_lines(results: dict[str, list[dict[str, Any]]]) -> list[tuple[int, str]]:
    """(rate, budget line) measured in every run of both sides: ramp steps only."""
    seen = [{(step["rate_per_s"], line) for step in run["steps"] if step["phase"] == "ramp"
             for line in step.get("budget", {}).get("per_settled", {})}
            for runs in results.values() for run in runs]
    return sorted(set.intersection(*seen)) if seen else []


def _budget(run: dict[str, Any], rate: int, line: str) -> float | None:
    step = next(s for s in run["steps"] if s["phase"] == "ramp" and s["rate_per_s"] == rate)
    return step["budget"]["per_settled"][line]["measured"]


def _figure(a: list[float | None], b: list[float | None]) -> dict[str, Any]:
    known_a, known_b = [x for x in a if x is not None], [x for x in b if x is not None]
    ratio = None
    if known_a and known_b and statistics.median(known_a):
        ratio = round(statistics.median(known_b) / statistics.median(known_a), 3)
    return {"a": a, "b": b, "b_over_a": ratio}


def _print(report: dict[str, Any]) -> None:
    print(f"\n== A/B: A = {report['a']}, B = {report['b']} (median B ÷ median A)")
    for name, figure in report["figures"].items():
        print(f"  {name:<40} {figure['b_over_a'] if figure['b_over_a'] is not None else '-':>7}"
              f"   A {figure['a']}  B {figure['b']}")
