"""The garbage collector's probe (bench/gc_probe): loaded through PYTHONPATH into a process, it
records the collections the collector ran and times the full collection it asks for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PROBE = Path(__file__).resolve().parents[2] / "bench" / "gc_probe"
WORK = """
import gc, time
class Node:
    def __init__(self):
        self.me = self
for _ in range(50_000):
    Node()  # cycles: only the collector frees them
time.sleep(2.5)
"""


def test_a_process_reports_its_collections_and_the_full_one_asked_for(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(PROBE), "GC_PROBE_OUT": str(tmp_path),
           "GC_PROBE_AT": "1"}
    subprocess.run([sys.executable, "-c", WORK], env=env, check=True)
    (report,) = tmp_path.glob("*.json")
    recorded = json.loads(report.read_text())
    generations = {generation for _, generation, _ in recorded["collections"]}
    assert 0 in generations  # the young collections the cycles set off
    assert all(pause >= 0 for _, _, pause in recorded["collections"])
    (asked,) = recorded["asked"]
    assert asked["ms"] >= 0 and asked["frozen"] == 0


def test_without_an_output_folder_the_probe_does_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "GC_PROBE_OUT"}
    env["PYTHONPATH"] = str(PROBE)
    out = subprocess.run([sys.executable, "-c", "import gc; print(len(gc.callbacks))"],
                         env=env, check=True, capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.strip() == "0"
