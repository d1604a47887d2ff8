"""An example of ``examples/`` as a module (examples/ is no package), for the tests that drive
its functions on a pipeline stage's topics."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example(filename: str) -> ModuleType:
    path = EXAMPLES / filename
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
