"""A probe of the garbage collector in every Python process of a run, loaded by putting this
folder on ``PYTHONPATH`` (Python imports ``sitecustomize`` at start-up):

    PYTHONPATH=bench/gc_probe GC_PROBE_OUT=/tmp/gc python -m bench.e2e ...

Each process records every collection the collector runs by itself (its generation and how long
it stopped the process) and, ``GC_PROBE_AT`` seconds after it started (default 60, 90 and 120:
under load in a short run), one full collection it asks for and times, and writes them to
``$GC_PROBE_OUT/<pid>.json`` every few seconds. ``bench/README.md`` ("The garbage collector's
full collections, frozen") reads runs of it. Not part of any service: a measuring tool only.
"""

import gc
import json
import os
import sys
import threading
import time

_OUT = os.environ.get("GC_PROBE_OUT")
_AT = [float(s) for s in os.environ.get("GC_PROBE_AT", "60,90,120").split(",")]
_began = time.monotonic()
_record = {"argv": sys.argv, "collections": [], "asked": []}
_start: list[float] = []


def _timed(phase: str, info: dict) -> None:
    if phase == "start":
        _start.append(time.perf_counter())
    elif _start:
        _record["collections"].append([time.time(), info["generation"],
                                       (time.perf_counter() - _start.pop()) * 1000])


def _probe() -> None:
    pending = sorted(_AT)
    while True:
        time.sleep(1.0)
        if pending and time.monotonic() - _began >= pending[0]:
            pending.pop(0)
            began = time.perf_counter()
            gc.collect()
            _record["asked"].append({"t": time.time(), "ms": (time.perf_counter() - began) * 1000,
                                     "frozen": gc.get_freeze_count()})
        with open(os.path.join(_OUT, f"{os.getpid()}.json"), "w") as file:
            json.dump(_record, file)


if _OUT:
    os.makedirs(_OUT, exist_ok=True)
    gc.callbacks.append(_timed)
    threading.Thread(target=_probe, daemon=True, name="gc-probe").start()
