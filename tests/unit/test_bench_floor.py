"""The pipeline beside its floor (bench/e2e/floor.py): the skeleton runs at the latency target's
rate, the ramp's sustained rate and issue 22's target rate; the pipeline's figures are given
as multiples of the skeleton's where both ran at one rate (CPU only at 10/s, where neither
fills the machine), and nothing is invented where the skeleton did not run."""

from __future__ import annotations

from bench.e2e.floor import beside_floor, floor_rates
from bench.e2e.steps import Step


def step(rate: int, sustainable: bool, phase: str = "ramp") -> Step:
    return Step(index=0, rate=rate, planned_s=30.0, phase=phase,
                verdict={"sustainable": sustainable, "reasons": []})


def skeleton_step(rate: int, cpu_ms: float, p50_ms: float, sustained: bool = True) -> dict:
    return {"rate_per_s": rate, "p50_ms": p50_ms, "p99_ms": p50_ms * 2, "sustained": sustained,
            "cpu_ms_per_settled": {"intake": cpu_ms / 2, "agent": 3.0, "all": cpu_ms}}


def pipeline_step(rate: int, p50_ms: float, phase: str = "ramp", **cpu_ms: float) -> dict:
    lines = {f"{name} cpu_ms": {"measured": value, "budget": 1.5, "over": value > 1.5}
             for name, value in cpu_ms.items()}
    lines["statements"] = {"measured": 20.0, "budget": 25.0, "over": False}
    return {"rate_per_s": rate, "phase": phase, "settled_ms": {"p50": p50_ms},
            "budget": {"per_settled": lines, "over": []}}


SKELETON = {"sustained_per_s": 200,
            "steps": [skeleton_step(10, 38.0, 25.0), skeleton_step(70, 25.0, 74.0),
                      skeleton_step(200, 9.1, 108.7)]}


def test_the_skeleton_runs_at_the_target_rates_and_the_ramps_last_sustained_one():
    steps = [step(10, True), step(40, True), step(70, True), step(80, False),
             step(50, True, phase="history")]
    assert floor_rates(steps) == "10,70,200"
    assert floor_rates([step(10, False)]) == "10,200"


def test_the_pipeline_is_a_multiple_of_the_floor_at_the_same_rate():
    quiet = pipeline_step(10, 41.0, postgres=20.0, kafka=14.0, dispatcher=9.0, relay=7.0)
    best = pipeline_step(70, 413.0, postgres=8.0, kafka=3.5, dispatcher=4.0, relay=2.5)
    headline = pipeline_step(10, 46.0, phase="latency", postgres=99.0)

    floor = beside_floor(SKELETON, [quiet, best, headline], best, headline)

    assert floor["cpu_vs_floor"] == round(50.0 / 38.0, 2)  # the ramp's 10/s; statements left out
    assert floor["p50_vs_floor"] == round(46.0 / 25.0, 2)
    assert floor["p50_vs_floor_at_sustained"] == round(413.0 / 74.0, 2)
    assert floor["sustained_vs_floor"] == 0.35
    assert floor["per_rate"][200] == {"cpu_ms": 9.1, "p50_ms": 108.7, "p99_ms": 217.4,
                                      "sustained": True}


def test_no_ratio_without_a_skeleton_step_at_that_rate_and_none_without_the_skeleton():
    nothing_arrived = skeleton_step(70, 0.0, 1.0, False) | {"p50_ms": None, "p99_ms": None}
    skeleton = {"sustained_per_s": None,
                "steps": [skeleton_step(200, 9.0, 150.0, False), nothing_arrived]}
    best = pipeline_step(70, 400.0, postgres=8.0)
    floor = beside_floor(skeleton, [pipeline_step(10, 41.0, postgres=20.0), best], best, None)
    assert floor["per_rate"][70]["p50_ms"] is None
    assert floor["cpu_vs_floor"] is None
    assert floor["p50_vs_floor"] is None
    assert floor["p50_vs_floor_at_sustained"] is None
    assert floor["sustained_vs_floor"] is None

    assert beside_floor(None, [], None, None) is None
    assert beside_floor({"error": "RuntimeError: the skeleton carried no proposal"}, [], None,
                        None) is None


def test_the_floor_plot_is_drawn_from_the_result_and_a_stale_one_is_not_left(tmp_path):
    from bench.e2e.plots import plot_all

    ramp = [pipeline_step(10, 41.0, postgres=20.0), pipeline_step(70, 413.0, postgres=8.0)]
    result = {"steps": ramp, "sustained_proposals_per_s": 70,
              "floor": beside_floor(SKELETON, ramp, ramp[1], ramp[0])}
    written = plot_all(result, None, tmp_path)  # the other plots need a run's timeline
    assert (tmp_path / "e2e-floor.png") in written
    assert (tmp_path / "e2e-floor.png").stat().st_size > 10_000

    written = plot_all({**result, "floor": None}, None, tmp_path)
    assert not (tmp_path / "e2e-floor.png").exists()
    assert (tmp_path / "e2e-floor.png") not in written
