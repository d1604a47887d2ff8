"""The run's output: ``e2e.json`` (the result), ``e2e-timeline.json`` (the per-second samples
behind the timeline plot) and the summary printed at the end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_json(result: dict[str, Any], timeline: list[dict[str, Any]], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "e2e.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    # The per-second samples behind the timeline plot, for anyone re-plotting or digging.
    (out / "e2e-timeline.json").write_text(json.dumps(
        [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in sample.items()}
         for sample in timeline], default=str) + "\n")


def print_summary(result: dict[str, Any], out: Path, plots: list[Path]) -> None:
    print(f"\n== end-to-end, {result['cores']} cores, "
          f"{'PASSED' if result['passed'] else 'FAILED'} correctness")
    for step in result["steps"]:
        s = step["settled_ms"]
        print(f"  {step['phase']:>7} {step['rate_per_s']:>5}/s for {step['duration_s']:>5.1f} s: offered "
              f"{step['offered_per_s']:>7.1f}/s settled {step['settled_per_s']:>7.1f}/s  "
              f"p50 {s['p50']} p99 {s['p99']} max {s['max']} ms  backlog max "
              f"{step['backlog_max']}  {'sustainable' if step['sustainable'] else 'NOT sustainable'}"
              + ("" if step["sustainable"] else f" ({'; '.join(step['verdict']['reasons'])})"
                 if step["verdict"] else ""))
    print(f"  sustained {result['sustained_proposals_per_s']}/s; at "
          f"{result['latency_at_rate_per_s']}/s p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms")
    if history := result.get("history"):
        print(f"  history: {history['proposals']} settled proposals preloaded "
              f"({history['rows_copied_total']} rows, {history['copy_s']} s, "
              f"{history['database_size']}); sustained on it "
              f"{result['sustained_on_history_per_s']}/s, "
              f"{result['history_vs_fresh']}x the fresh ledger's")
    if result.get("client_at_rate_per_s"):
        print(f"  through the client at {result['client_at_rate_per_s']}/s: p50 "
              f"{result['client_p50_ms']} ms, p99 {result['client_p99_ms']} ms")
    if budget := result.get("budget_at_sustained"):
        print("  per settled proposal at the sustained rate (measured / budget): " + ", ".join(
            f"{name} {line['measured']}/{line['budget']}{' OVER' if line['over'] else ''}"
            for name, line in budget["per_settled"].items()))
    print("  cpu s / peak MB: " + ", ".join(
        f"{name} {p['cpu_s']}/{p['peak_rss_mb']}" for name, p in result["processes"].items()))
    if (spent := result["postgres_time"]) is not None:
        print(f"  postgres per settled proposal: executing {spent['exec_ms_per_settled']} ms, "
              f"planning {spent['plan_ms_per_settled']} ms ({spent['plans_per_settled']} plans)")
    correctness = result["correctness"]
    print(f"  retry amplification {correctness['retry_amplification']}, "
          f"states {correctness['dispatcher_states']}")
    for failure in correctness["failures"] + result["problems"]:
        print(f"  FAILED: {failure}")
    print(f"  dbos_workflows_per_s {result['dbos_workflows_per_s']}, pgbench_tps "
          f"{result['pgbench_tps']}, hop_floor_ms {result['hop_floor_ms']} (p50 "
          f"{result['p50_vs_hop_floor']}x)" + (f" ({result['baselines'].get('reason')})"
                                        if result["baselines"].get("reason") else ""))
    if floor := result.get("floor"):
        print(f"  the skeleton (no work in the hops) sustained {floor['sustained_per_s']}/s; "
              f"the pipeline's CPU per proposal at 10/s {floor['cpu_vs_floor']}x its, p50 "
              f"{floor['p50_vs_floor']}x its, at the sustained rate "
              f"{floor['p50_vs_floor_at_sustained']}x; per rate: " + ", ".join(
                  f"{rate}/s {line['cpu_ms']} ms, p50 {line['p50_ms']} ms"
                  for rate, line in floor["per_rate"].items()))
    print(f"  wrote {out / 'e2e.json'}, e2e-timeline.json and "
          f"{', '.join(p.name for p in plots)}")
