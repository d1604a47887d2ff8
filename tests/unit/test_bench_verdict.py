"""The verdict on a step reads the backlog that stood at its end, not where one sample of the
lag's sawtooth fell; the p99 and the generator are judged as before."""

from __future__ import annotations

from bench.e2e.config import parse_config
from bench.e2e.proposals import Proposals
from bench.e2e.steps import STANDING_S, Step, judge, standing_backlog

START, END = 1_000.0, 1_030.0


def timeline(backlogs: list[int | None]) -> list[dict]:
    """One sample a second, the last at the step's end."""
    return [{"t": END - (len(backlogs) - 1 - i), "backlog": b} for i, b in enumerate(backlogs)]


def kept_up(rate: int) -> tuple[Step, Proposals]:
    """A step at ``rate`` whose every proposal settled 50 ms after it was published."""
    step, proposals = Step(index=0, rate=rate, planned_s=END - START, started=START,
                           ended=END), Proposals()
    for i in range(int(rate * (END - START))):
        proposals.t_pub.append(START + i / rate)
        proposals.t_set.append(START + i / rate + 0.05)
    step.last = len(proposals.t_pub)
    return step, proposals


def test_a_sawtooth_that_drains_is_judged_by_its_trough():
    sawtooth = [120, 330, 250, 140, 310, 90, 240, 320]  # ends on a peak above the bound
    step, proposals = kept_up(60)
    verdict = judge(step, proposals, timeline(sawtooth), parse_config([]))
    assert verdict == verdict | {"sustainable": True, "backlog_at_end": 90, "backlog_bound": 200}


def test_a_backlog_that_stands_through_the_window_fails_the_step():
    growing = [150, 180, 210, 240, 260, 290, 320, 350]
    step, proposals = kept_up(60)
    verdict = judge(step, proposals, timeline(growing), parse_config([]))
    assert not verdict["sustainable"]
    assert verdict["reasons"] == ["backlog at its end 210 > 200"]  # 5 s back: 210


def test_samples_outside_the_window_or_missing_do_not_count():
    samples = timeline([0, 0, 0, None, 420, 410, 430, 415, 440, 425])  # the zeros: > 5 s old
    assert standing_backlog(samples, END) == 410
    assert STANDING_S == 5.0


def test_without_a_sample_in_the_window_the_nearest_one_counts():
    assert standing_backlog([{"t": END + 9, "backlog": 7}, {"t": END - 30, "backlog": 1}], END) == 7
    assert standing_backlog([], END) is None


def test_late_proposals_fail_a_step_whatever_its_backlog():
    step, proposals = kept_up(10)
    for i in range(step.last // 2, step.last):
        proposals.t_set[i] += 2.0  # the second half settled two seconds late
    verdict = judge(step, proposals, timeline([0] * 8), parse_config([]))
    assert not verdict["sustainable"] and verdict["reasons"][0].startswith("p99 of its second half")
