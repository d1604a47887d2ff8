"""The same-run comparison: the baselines and the peer of ``bench.baselines``, measured after
the pipeline stopped, on the same Kafka and PostgreSQL, with the machine to themselves."""

from __future__ import annotations

import inspect
import time
from collections.abc import Mapping
from typing import Any

from shared.config import Endpoints

QUICK_SIZES = {"seconds": 5.0, "records": 20_000, "rounds": 1, "latency_workflows": 50,
               "samples": 30, "step_s": 5.0}
"""With ``--quick``, each baseline runs with those of these sizes it takes."""
SKIPPED = {"dbos_workflows_per_s": None, "pgbench_tps": None, "hop_floor_ms": None,
           "reason": "skipped (--no-baselines)"}
"""The baselines' entry of the result when ``--no-baselines`` (or ``--quick``) leaves them out."""


async def run_baselines(endpoints: Endpoints, *, quick: bool,
                        sizes: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The baselines and the peer of ``bench.baselines``; ``sizes`` gives some of them
    arguments of the run's own (the skeleton's rates, ``floor.floor_rates``).

    That package offers ``NAMES`` and ``baseline(name)``, a coroutine ``run(endpoints, **size)``
    returning a dict; ``dbos_workflows_per_s`` is ``dbos_peer``'s ``workflows_per_s``,
    ``pgbench_tps`` is ``pgbench``'s ``tps`` and ``hop_floor_ms`` is ``hop_floor``'s. It is
    imported guarded: when it is missing or a baseline fails, the figure is null and ``reason``
    says why; the end-to-end figures stand."""
    figures: dict[str, Any] = {"dbos_workflows_per_s": None, "pgbench_tps": None,
                               "hop_floor_ms": None}
    try:
        import bench.baselines as baselines  # noqa: PLC0415 (optional: written separately)
        names, runner = baselines.NAMES, baselines.baseline
    except Exception as error:  # not there, or not the interface expected
        return figures | {"reason": f"bench.baselines not usable: {type(error).__name__}: {error}"}
    details: dict[str, Any] = {}
    reasons = []
    for name in names:
        began = time.monotonic()
        try:
            run = runner(name)
            parameters = inspect.signature(run).parameters
            chosen = {k: v for k, v in QUICK_SIZES.items() if k in parameters} if quick else {}
            details[name] = await run(endpoints, **chosen, **(sizes or {}).get(name, {}))
            details[name]["wall_s"] = round(time.monotonic() - began, 1)
        except Exception as error:  # one baseline failing must not cost the others
            reasons.append(f"{name} failed: {type(error).__name__}: {error}")
            details[name] = {"error": f"{type(error).__name__}: {error}"}
    figures["details"] = details
    figures["dbos_workflows_per_s"] = (details.get("dbos_peer") or {}).get("workflows_per_s")
    figures["pgbench_tps"] = (details.get("pgbench") or {}).get("tps")
    figures["hop_floor_ms"] = (details.get("hop_floor") or {}).get("hop_floor_ms")
    for key, source in (("dbos_workflows_per_s", "dbos_peer"), ("pgbench_tps", "pgbench"),
                        ("hop_floor_ms", "hop_floor")):
        if figures[key] is None and not any(r.startswith(source) for r in reasons):
            reasons.append(f"{source} gave no figure for {key}")
    if reasons:
        figures["reason"] = "; ".join(reasons)
    return figures
