"""The layout's rules, which a reader relies on to find things:

- a service imports only itself and the shared libraries, never another service (what two of
  them share is a library under ``shared/``); a reference downstream likewise; the libraries
  import no component at all; only the command line (``intentledger/``) composes them;
- the repository is whole: no tracked file names a path outside it, and the unit suite passes
  from a copy of the tracked files with nothing beside it.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPONENTS = ("services", "downstreams")
"""Packages of components: each subpackage is one service or one downstream."""
OUTSIDE = "../" + "shared"
"""A path into the workspace the repository was developed in (a clone has no such folder)."""


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, at the top or lazily inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def owner(module: str) -> str:
    """``services.policy.engine`` -> ``services.policy``; ``shared.x`` -> ``shared``."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] in COMPONENTS else parts[0]


def layering_problems(package: Path) -> list[str]:
    problems = []
    for path in sorted(package.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        own = owner(module)
        for imported in sorted(imports_of(path)):
            theirs = owner(imported)
            if imported.split(".")[0] not in ("shared", *COMPONENTS, "intentledger") \
                    or theirs == own:
                continue  # the standard library, a third-party package, or itself
            if own == "shared" or theirs != "shared":
                problems.append(f"{path.relative_to(ROOT)} imports {imported}")
    return problems


@pytest.mark.parametrize("package", ["services", "downstreams", "shared"])
def test_no_component_imports_another_and_the_libraries_import_none(package):
    assert layering_problems(ROOT / package) == []


def test_a_service_importing_another_is_reported(tmp_path, monkeypatch):
    fake = tmp_path / "services" / "dispatcher"
    fake.mkdir(parents=True)
    (fake / "view.py").write_text("def f():\n    from services.policy.engine import evaluate\n")
    (fake / "fine.py").write_text("from services.dispatcher import x\nfrom shared.db import y\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert layering_problems(tmp_path / "services") == [
        "services/dispatcher/view.py imports services.policy.engine"]


def tracked_files() -> list[Path]:
    """Git's list; a copy made of that list (the test below) has no ``.git``: all of it."""
    if not (ROOT / ".git").exists():
        return [path for path in ROOT.rglob("*") if "__pycache__" not in path.parts]
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [ROOT / name for name in listed.stdout.decode().split("\0") if name]


def test_no_tracked_file_names_a_path_outside_the_repository():
    naming = [str(path.relative_to(ROOT)) for path in tracked_files()
              if path.is_file() and OUTSIDE.encode() in path.read_bytes()]
    assert naming == []


def test_the_unit_suite_passes_from_a_copy_with_nothing_beside_it(tmp_path):
    """What a user's clone is: the tracked files alone (CI's clone has the workspace beside it,
    so this is the one run that proves nothing reads from there)."""
    if os.environ.get("INTENTLEDGER_IN_COPY"):
        pytest.skip("this run is the copy")
    copy = tmp_path / "alone" / "intentledger"
    for path in tracked_files():
        if path.is_file():
            target = copy / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    assert not (copy.parent.parent / "shared").exists() and not (copy.parent / "shared").exists()
    env = {**os.environ, "INTENTLEDGER_IN_COPY": "1",
           "PYTHONPATH": os.pathsep.join([str(copy), str(copy / "clients" / "python" / "src")]),
           # mypy's cache of the checkout's run: its dependencies' types, which the copy does not
           # change (the copy's own files are checked again, being at other paths); without it
           # the client's mypy test checks every dependency a second time, 40 s of this test's 2 min
           "MYPY_CACHE_DIR": str(ROOT / "clients" / "python" / ".mypy_cache")}
    where = subprocess.run([sys.executable, "-c", "import shared; print(shared.__file__)"],
                           cwd=copy, env=env, capture_output=True, text=True, check=True)
    assert where.stdout.startswith(str(copy)), "the copy's own code must be the code tested"
    client = subprocess.run([sys.executable, "-c", "import intentledger_client as c; print(c.__file__)"],
                            cwd=copy, env=env, capture_output=True, text=True, check=True)
    assert client.stdout.startswith(str(copy)), "and the copy's own agent client"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "tests/unit"], cwd=copy, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
