"""The benchmark's per-component budget: each component's cost per settled proposal beside its
budget, replicas counted as their service, and the components over it named, worst first."""

from __future__ import annotations

from bench.e2e.budget import step_budget

KINDS = {"postgres": "postgres", "kafka": "kafka", "dispatcher": "python",
         "dispatcher#2": "python", "relay": "python", "harness": "python"}


def cpu(**seconds: float) -> dict[str, dict[str, float]]:
    return {name.replace("_2", "#2"): {"cpu_s": value, "cores": 0.0}
            for name, value in seconds.items()}


def test_each_component_is_measured_per_settled_proposal_against_its_budget():
    budget = step_budget(cpu(postgres=2.0, kafka=0.5, relay=0.1, harness=9.0,
                             **{"machine (all processes)": 20.0}), KINDS,
                         {"statements": 30.0, "commits": 5.0}, settled=1000)
    assert budget["per_settled"] == {
        "postgres cpu_ms": {"measured": 2.0, "budget": 4.0, "over": False},
        "kafka cpu_ms": {"measured": 0.5, "budget": 1.5, "over": False},
        "relay cpu_ms": {"measured": 0.1, "budget": 1.5, "over": False},
        "statements": {"measured": 30.0, "budget": 25.0, "over": True},
        "commits": {"measured": 5.0, "budget": 6.0, "over": False}}
    assert budget["over"] == ["statements"]


def test_a_services_replicas_share_its_budget_and_the_worst_overrun_comes_first():
    budget = step_budget(cpu(dispatcher=1.0, dispatcher_2=1.0, postgres=5.0), KINDS,
                         {"statements": 26.0, "commits": None}, settled=1000)
    assert budget["per_settled"]["dispatcher cpu_ms"]["measured"] == 2.0
    assert "dispatcher#2 cpu_ms" not in budget["per_settled"]
    assert budget["over"] == ["dispatcher cpu_ms", "postgres cpu_ms", "statements"]
    assert "commits" not in budget["per_settled"]  # not measured is not zero


def test_a_step_that_settled_nothing_has_no_cpu_per_proposal():
    budget = step_budget(cpu(postgres=5.0), KINDS, None, settled=0)
    assert budget == {"per_settled": {}, "over": []}


def run(passed=True, sustained=30, statements=85.0, rates=(10, 20)):
    return {"passed": passed, "sustained_proposals_per_s": sustained, "p50_ms": 80.0,
            "p99_ms": None, "proposals_per_cpu_s": 15.0,
            "steps": [{"phase": "ramp", "rate_per_s": rate, "budget": {"per_settled": {
                "statements": {"measured": statements, "budget": 25.0, "over": True}}}}
                for rate in rates] + [{"phase": "latency", "rate_per_s": 10, "budget": {
                    "per_settled": {"commits": {"measured": 1.0}}}}]}


def test_an_ab_reports_the_median_of_b_over_the_median_of_a_per_figure():
    from bench.e2e.compare import compare

    report = compare({"A": [run(sustained=30), run(sustained=40)],
                      "B": [run(sustained=70, statements=42.5, rates=(10,))]},
                     ref="main", bench_args=["--quick"])
    figures = report["figures"]
    assert figures["sustained_proposals_per_s"] == {"a": [30, 40], "b": [70], "b_over_a": 2.0}
    assert figures["at 10/s: statements"]["b_over_a"] == 0.5
    assert "at 20/s: statements" not in figures  # B never ran that step: nothing to compare
    assert figures["p99_ms"]["b_over_a"] is None  # not measured is not a ratio
    assert not any("commits" in name for name in figures)  # the latency phase is not a ramp step
