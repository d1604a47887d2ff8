"""``--profile-rate``: py-spy on every service process during one step, and the functions most
often on CPU in each."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from bench.e2e.config import Config
from bench.e2e.steps import Step
from intentledger.chaos.stack import Stack


class Profiler:
    def __init__(self, config: Config, stack: Stack) -> None:
        self.config = config
        self.stack = stack
        self.profiles: dict[str, Any] = {}
        """Per service replica: the summary and the raw file, or the error."""

    async def profile(self, step: Step) -> None:
        """py-spy on every service process during part of ``step`` (raw collapsed stacks), and
        the functions most often on CPU in each."""
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        if not Path(py_spy).exists():
            self.profiles["error"] = "py-spy is not installed (pip install py-spy)"
            return
        await asyncio.sleep(min(5.0, step.planned_s / 4))
        seconds = max(1, int(min(self.config.profile_s, step.planned_s - 5)))
        folder = self.config.out / "profiles"
        folder.mkdir(parents=True, exist_ok=True)
        step.profiled = True
        spies = {}
        for replica in self.stack.replicas.values():
            assert replica.process is not None
            path = folder / f"{replica.label}-{step.rate}.txt"
            spies[replica.label] = (path, await asyncio.create_subprocess_exec(
                py_spy, "record", "--pid", str(replica.process.pid), "--duration", str(seconds),
                "--rate", "50", "--format", "raw", "--nonblocking", "--output", str(path),
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        for label, (path, process) in spies.items():
            _, error = await process.communicate()
            if process.returncode != 0 or not path.exists():
                self.profiles[label] = {"error": error.decode(errors="replace")[-300:]}
                continue
            self.profiles[label] = _summarise(path) | {"file": str(path), "rate": step.rate,
                                                       "seconds": seconds}


def _summarise(path: Path, top: int = 15) -> dict[str, Any]:
    """From py-spy's collapsed stacks: the share of samples each function is on top of the
    stack (self) and anywhere in it (inclusive)."""
    own: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [re.sub(r" \(.*?/(site-packages|work/main)/", " (", frame)
                  for frame in stack.split(";") if frame]
        if frames:
            own[frames[-1]] += n
        for frame in set(frames):
            anywhere[frame] += n
    share = (lambda n: round(100 * n / total, 1)) if total else (lambda n: 0.0)
    return {"samples": total,
            "self_percent": [(frame, share(n)) for frame, n in own.most_common(top)],
            "inclusive_percent": [(frame, share(n)) for frame, n in anywhere.most_common(top)]}
