"""The end-to-end benchmark's plots (matplotlib, no display): throughput, latency and backlog over
time; the latency CDF of the latency phase and of every step; CPU and memory per process;
latency per hop; the ramp beside its skeleton (``floor``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.e2e.config import LATENCY_TARGETS_MS
from bench.e2e.figures import MACHINE, OTHER
from bench.e2e.floor import cpu_ms_per_settled

if TYPE_CHECKING:
    from bench.e2e.harness import Bench

COLOURS = ["#2b6cb0", "#dd6b20", "#38a169", "#805ad5", "#e53e3e", "#d69e2e", "#319795",
           "#718096", "#b83280", "#2c5282", "#9c4221"]


def plot_all(result: dict[str, Any], bench: Bench, out: Path) -> list[Path]:
    """Every plot that could be drawn (matplotlib is imported only now)."""
    import matplotlib

    matplotlib.use("Agg")
    written = []
    for name, draw in (("e2e-timeline.png", _timeline), ("e2e-latency-cdf.png", _cdf),
                       ("e2e-cpu.png", _cpu), ("e2e-hops.png", _hops),
                       ("e2e-floor.png", _floor)):
        path = out / name
        path.unlink(missing_ok=True)  # an earlier run's, which this run's figures may not match
        try:
            draw(result, bench, path)
            if path.exists():  # a plot with nothing to show draws nothing
                written.append(path)
        except Exception as error:  # a plot must never cost the figures
            print(f"  plot {name} failed: {type(error).__name__}: {error}")
    return written


def _steps_shading(axis, result: dict[str, Any], t0: float, bench: Bench) -> None:
    for index, step in enumerate(bench.steps):
        if not step.started:
            continue
        figures = result["steps"][index]
        colour = "#c6f6d5" if figures["sustainable"] else "#fed7d7"
        axis.axvspan(step.started - t0, step.ended - t0, color=colour, alpha=0.35, lw=0)


def _timeline(result: dict[str, Any], bench: Bench, path: Path) -> None:
    import matplotlib.pyplot as plt

    samples = bench.timeline
    if len(samples) < 2:
        return
    t0 = samples[0]["t"]
    t = np.array([s["t"] - t0 for s in samples])
    figure, (rates, latency, backlog) = plt.subplots(3, 1, figsize=(12, 10), sharex=True)

    mid = (t[1:] + t[:-1]) / 2
    span = np.diff(t)
    for key, label, colour in (("published", "published (offered)", COLOURS[0]),
                               ("accepted", "accepted (intake answer)", COLOURS[2]),
                               ("settled", "settled (ToolCallSettled)", COLOURS[1])):
        counts = np.array([s[key] for s in samples], dtype=float)
        rates.plot(mid, np.diff(counts) / span, label=label, color=colour, lw=1.2)
    for step in bench.steps:
        if step.started:
            rates.hlines(step.rate, step.started - t0, step.ended - t0, colors="black",
                         linestyles="dotted", lw=1)
    rates.set_ylabel("proposals / s")
    rates.set_title(f"End to end, {result['cores']} cores: sustained "
                    f"{result['sustained_proposals_per_s']}/s (green: sustainable step, "
                    f"red: not; dotted: offered rate)")
    rates.legend(loc="upper left", fontsize=8)
    _steps_shading(rates, result, t0, bench)

    published = np.array(bench.proposals.t_pub) - t0
    settled = np.array(bench.proposals.t_set) - t0
    done = ~np.isnan(settled)
    if done.any():
        late = (settled - published)[done] * 1000
        seconds = np.floor(published[done]).astype(int)
        by_second: dict[int, list[float]] = {}
        for second, value in zip(seconds, late, strict=True):
            by_second.setdefault(int(second), []).append(float(value))
        xs = sorted(by_second)
        for q, label, colour in ((50, "p50", COLOURS[0]), (99, "p99", COLOURS[4]),
                                 (100, "max", "#a0aec0")):
            latency.plot(xs, [np.percentile(by_second[x], q) for x in xs], label=label,
                         color=colour, lw=1.0)
        latency.set_yscale("log")
    latency.axhline(result["criteria"]["max_p99_ms"], color="black", ls="dotted", lw=1,
                    label="bound for a sustainable step")
    latency.set_ylabel("publish → settled (ms)\nby second of publish")
    latency.legend(loc="upper left", fontsize=8)
    _steps_shading(latency, result, t0, bench)

    for index, group in enumerate(samples[0]["lag"]):
        backlog.plot(t, [max(s["lag"][group], 0.8) for s in samples], label=f"lag {group}",
                     color=COLOURS[index % len(COLOURS)], lw=1.0)
    backlog.plot(t, [max(sum(s["outbox_pending"].values()), 0.8) for s in samples],
                 label="outbox rows pending (relay)", color="black", lw=1.0, ls="--")
    backlog.plot(t, [max(s["dispatcher_due"], 0.8) for s in samples],
                 label="calls due at the dispatcher", color="#e53e3e", lw=1.0, ls="-.")
    backlog.set_yscale("log")
    backlog.set_ylabel("records / rows waiting")
    backlog.set_xlabel("seconds since the first sample")
    backlog.legend(loc="upper left", fontsize=7, ncol=2)
    _steps_shading(backlog, result, t0, bench)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _cdf(result: dict[str, Any], bench: Bench, path: Path) -> None:
    import matplotlib.pyplot as plt

    proposals = bench.proposals
    figure, (headline, every) = plt.subplots(1, 2, figsize=(12, 4.5))
    index = result.get("headline_step")
    if index is not None:
        step = bench.steps[index]
        for column, label, colour in ((proposals.t_set, "publish → ToolCallSettled", COLOURS[1]),
                                      (proposals.t_acc, "publish → ProposalAccepted", COLOURS[2])):
            values = sorted((column[i] - proposals.t_pub[i]) * 1000
                            for i in range(step.first, step.last) if not math.isnan(column[i]))
            if values:
                headline.plot(values, np.linspace(0, 1, len(values)), label=label, color=colour)
        figures = result["steps"][index]["settled_ms"]
        headline.set_title(f"{step.rate}/s offered: settled p50 {figures['p50']} ms, "
                           f"p99 {figures['p99']} ms")
        for target in LATENCY_TARGETS_MS:
            headline.axvline(target, color="#a0aec0", ls="dotted", lw=1)
        headline.axhline(0.5, color="#e2e8f0", lw=0.8)
        headline.axhline(0.99, color="#e2e8f0", lw=0.8)
        headline.set_xscale("log")
        headline.set_xlabel("latency (ms); dotted: the {} ms p50 and {} ms p99 targets"
                            .format(*LATENCY_TARGETS_MS))
        headline.set_ylabel("fraction of calls")
        headline.legend(loc="lower right", fontsize=8)
    for n, step in enumerate(bench.steps):
        values = sorted(x for x in (proposals.latency_ms(i) for i in range(step.first, step.last))
                        if not math.isnan(x))
        if values:
            every.plot(values, np.linspace(0, 1, len(values)), color=COLOURS[n % len(COLOURS)],
                       label=f"{result['steps'][n]['phase']} {step.rate}/s"
                             + ("" if result["steps"][n]["sustainable"] else " (not sustainable)"))
    every.set_xscale("log")
    every.set_title("publish → settled, every step")
    every.set_xlabel("latency (ms)")
    # Beside the axes, in columns of 13: a run with history has two dozen steps.
    every.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7,
                 ncol=max(1, math.ceil(len(every.get_lines()) / 13)))
    figure.tight_layout()
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)


def _cpu(result: dict[str, Any], bench: Bench, path: Path) -> None:
    import matplotlib.pyplot as plt

    steps = result["steps"]
    names = [n for n in result["processes"]]
    figure, (cores, memory) = plt.subplots(1, 2, figsize=(13, 4.8),
                                           gridspec_kw={"width_ratios": [3, 2]})
    labels = [f"{s['rate_per_s']}/s" for s in steps]
    bottom = np.zeros(len(steps))
    for index, name in enumerate(names):
        values = np.array([s["cpu"].get(name, {}).get("cores", 0.0) for s in steps])
        cores.bar(labels, values, bottom=bottom, label=name, color=COLOURS[index % len(COLOURS)])
        bottom += values
    other = np.array([max(s["cpu"].get(OTHER, {}).get("cores", 0.0), 0.0)
                      for s in steps])
    cores.bar(labels, other, bottom=bottom, label="other processes (not the benchmark's)",
              color="#e2e8f0", hatch="//")
    machine = [s["cpu"].get(MACHINE, {}).get("cores", 0.0) for s in steps]
    cores.plot(labels, machine, "k_", markersize=30, label="whole machine")
    cores.axhline(result["cores"], color="black", ls="dotted", lw=1)
    cores.set_ylabel("cores busy (CPU s per s)")
    cores.set_title("CPU per process, by offered rate")
    cores.legend(fontsize=7, ncol=2, loc="upper left")
    peaks = [result["processes"][n]["peak_rss_mb"] or 0 for n in names]
    memory.barh(names, peaks, color=[COLOURS[i % len(COLOURS)] for i in range(len(names))])
    memory.axvline(150, color="black", ls="dotted", lw=1)
    for index, value in enumerate(peaks):
        memory.annotate(f"{value:,.0f}", (value, index), va="center", fontsize=8)
    memory.set_xlabel("peak memory (MB): RSS high-water mark; PostgreSQL: private + largest shared")
    memory.set_title("Memory (dotted: the 150 MB target per Python service)")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _hops(result: dict[str, Any], bench: Bench, path: Path) -> None:
    """One panel per step (each on its own scale): p50 and p99 of every hop, in pipeline order."""
    import matplotlib.pyplot as plt

    hops = result["hops"]
    steps = [s for s in result["steps"] if s["hops_ms"]]
    if not steps:
        return
    figure, axes = plt.subplots(len(steps), 1, figsize=(10, 1.2 + 2.3 * len(steps)),
                                squeeze=False)
    positions = np.arange(len(hops))
    for axis, step in zip(axes[:, 0], steps, strict=True):
        for offset, quantile, colour in ((-0.2, "p50", COLOURS[0]), (0.2, "p99", COLOURS[4])):
            values = [(step["hops_ms"].get(hop) or {}).get(quantile) or 0.0 for hop in hops]
            axis.barh(positions + offset, values, height=0.4, color=colour, label=quantile)
        axis.set_yticks(positions, hops, fontsize=7)
        axis.invert_yaxis()
        axis.set_title(f"{step['phase']} {step['rate_per_s']}/s: end to end p50 "
                       f"{step['settled_ms']['p50']} ms, p99 {step['settled_ms']['p99']} ms",
                       fontsize=9)
        axis.tick_params(axis="x", labelsize=7)
        axis.legend(fontsize=7, loc="lower right")
    axes[-1, 0].set_xlabel("latency of each hop (ms), from the ledger's own timestamps")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _floor(result: dict[str, Any], bench: Bench, path: Path) -> None:
    """The ramp beside its skeleton (``floor``): CPU per settled proposal and p50 by rate."""
    import matplotlib.pyplot as plt

    if not (floor := result.get("floor")):
        return
    ramp = [s for s in result["steps"] if s["phase"] == "ramp" and s["budget"]["per_settled"]]
    rates = [s["rate_per_s"] for s in ramp]
    cpu = [cpu_ms_per_settled(s) for s in ramp]
    skeleton_rates = sorted(int(rate) for rate in floor["per_rate"])
    skeleton_lines = [floor["per_rate"][rate] for rate in skeleton_rates]
    figure, (cost, latency) = plt.subplots(1, 2, figsize=(12, 4.5))
    cost.plot(rates, cpu, "o-", color=COLOURS[0], label="pipeline (ramp)")
    cost.plot(skeleton_rates, [line["cpu_ms"] for line in skeleton_lines], "s--", color=COLOURS[1],
              label="skeleton: no work in the hops")
    cost.set_ylabel("CPU ms per settled proposal (all processes but the load's)")
    latency.plot(rates, [s["settled_ms"]["p50"] for s in ramp], "o-", color=COLOURS[0],
                 label="pipeline (ramp)")
    latency.plot(skeleton_rates, [line["p50_ms"] for line in skeleton_lines], "s--", color=COLOURS[1],
                 label="skeleton")
    latency.set_yscale("log")
    latency.set_ylabel("publish → settled p50 (ms)")
    for axis in (cost, latency):
        axis.set_xlabel("offered proposals/s")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle(f"the pipeline beside its floor: the skeleton sustained "
                    f"{floor['sustained_per_s']}/s, the pipeline "
                    f"{result['sustained_proposals_per_s']}/s", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
