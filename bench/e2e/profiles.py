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


LOOP_FRAMES = ("Runner.run (", "run_forever (", "run_until_complete (")
"""The event loop's own run: a sample with one of these on top was in native code under the
loop, which Python frames cannot break down: uvloop waiting on its sockets (py-spy's idle
detection does not see that wait: 950 of 1,000 samples in 20 s of a dispatcher busy a third
of a core at 60/s), reading and writing them, and the C and Cython callbacks it runs, such as
asyncpg's protocol. At tens of proposals a second that is most samples of every service, most
of it waiting."""
OUR_PACKAGES = ("services/", "shared/", "downstreams/", "intentledger/", "intentledger_client/")
"""Where a frame of this repository's code comes from, as py-spy names its file."""


def _summarise(path: Path, top: int = 15) -> dict[str, Any]:
    """From py-spy's collapsed stacks: the share of samples in the event loop's native code
    (``loop_percent``), and of the others, the samples in Python code, the share each function
    is on top of the stack (``self_percent``) and each function of this repository is
    anywhere in it (``inclusive_percent``). Library frames are left out of the inclusive list
    because FastStream's and fast_depends' wrappers sit under every handler and would fill it;
    they still count on top of the stack."""
    own: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    total = in_loop = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        frames = [re.sub(r" \(.*?/(site-packages|work/main)/", " (", frame)
                  for frame in stack.split(";") if frame]
        if not frames:
            continue
        n = int(count)
        total += n
        if frames[-1].startswith(LOOP_FRAMES):
            in_loop += n
            continue
        own[frames[-1]] += n
        for frame in set(frames):
            if _ours(frame):
                anywhere[frame] += n
    in_python = total - in_loop

    def share(n: int, of: int) -> float:
        return round(100 * n / of, 1) if of else 0.0

    return {"samples": total, "loop_percent": share(in_loop, total),
            "python_samples": in_python,
            "self_percent": [(frame, share(n, in_python)) for frame, n in own.most_common(top)],
            "inclusive_percent": [(frame, share(n, in_python))
                                  for frame, n in anywhere.most_common(top)]}


def _ours(frame: str) -> bool:
    _, _, where = frame.partition(" (")
    return where.startswith(OUR_PACKAGES)
