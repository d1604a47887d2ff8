"""The agent client (``clients/python``) is thin and speaks the contract of its version: it
pins what the server pins, imports nothing of the server, and the server requires exactly it."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

import intentledger_client

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "python"
SERVER = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
CLIENT_PROJECT = tomllib.loads((CLIENT / "pyproject.toml").read_text("utf-8"))["project"]
ALLOWED = {"aiokafka", "pydantic", "joserfc", "uuid_utils", "intentledger_client"}
OPTIONAL = {"opentelemetry"}
"""Imported only if the agent has it (``tracing.py``)."""
FRAMEWORKS = {"openai_agents.py": {"agents"}, "langchain.py": {"langchain_core"},
              "langgraph.py": {"langgraph"}, "pydantic_ai.py": {"pydantic_ai"}}
"""The adapters (``intentledger_client.frameworks``): each imports its framework, installed by
the extra of the same name, and nothing else outside the package's dependencies."""
EXTRAS = {"openai-agents": {"openai-agents"}, "langchain": {"langchain-core"},
          "langgraph": {"langchain-core", "langgraph"}, "pydantic-ai": {"pydantic-ai-slim"}}


def _pins(requirements: list[str]) -> dict[str, str]:
    return {m["name"].lower(): m["pin"] for r in requirements
            if (m := re.match(r"(?P<name>[A-Za-z0-9_.-]+)(\[[^]]*])?==(?P<pin>[^;\s]+)", r))}


def test_the_client_is_versioned_with_the_public_contract() -> None:
    asyncapi = yaml.safe_load((ROOT / "schemas" / "asyncapi.yaml").read_text("utf-8"))
    assert intentledger_client.__version__ == asyncapi["info"]["version"]


def test_the_server_requires_exactly_this_client() -> None:
    assert _pins(SERVER["dependencies"])["intentledger-client"] == intentledger_client.__version__


def test_the_client_pins_what_the_server_pins_and_nothing_more() -> None:
    client, server = _pins(CLIENT_PROJECT["dependencies"]), _pins(SERVER["dependencies"])
    assert set(client) == {"aiokafka", "pydantic", "joserfc", "cryptography", "uuid-utils"}
    assert {name: server[name] for name in client} == client


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        names |= {a.name for a in node.names} if isinstance(node, ast.Import) else \
            {node.module} if isinstance(node, ast.ImportFrom) and node.module and not node.level \
            else set()
    return {n.split(".")[0] for n in names} - ALLOWED - set(sys.stdlib_module_names)


def _framework_of(path: Path) -> set[str]:
    return FRAMEWORKS.get(path.name, set()) if path.parent.name == "frameworks" else set()


def test_the_client_imports_only_its_dependencies_and_the_standard_library() -> None:
    strangers = {(path.name, name) for path in (CLIENT / "src").rglob("*.py")
                 for name in _imported(path) - _framework_of(path)}
    literal = {m for path in (CLIENT / "src").rglob("*.py")
               for m in re.findall(r'import_module\("([a-z_]+)', path.read_text("utf-8"))}
    assert strangers == set() and literal <= OPTIONAL
    adapters = {path.name for path in (CLIENT / "src" / "intentledger_client" / "frameworks").glob("*.py")}
    assert adapters >= set(FRAMEWORKS)


def test_each_framework_is_an_extra_pinned_exactly_and_the_base_install_pulls_none() -> None:
    extras = CLIENT_PROJECT["optional-dependencies"]
    for extra, dists in EXTRAS.items():
        assert set(_pins(extras[extra])) == dists and len(extras[extra]) == len(dists), extra
    base = set(_pins(CLIENT_PROJECT["dependencies"]))
    assert not base & set().union(*EXTRAS.values())
    imported = subprocess.run(  # importing the package (and its frameworks package) loads none
        [sys.executable, "-c", "import sys, intentledger_client, intentledger_client.frameworks."
         "ledger; print(sorted({m.split('.')[0] for m in sys.modules} & "
         f"set({sorted(set().union(*FRAMEWORKS.values()))!r})))"],
        capture_output=True, text=True, timeout=60, check=True)
    assert imported.stdout.strip() == "[]"


def test_the_server_tests_install_every_framework_extra() -> None:
    """So CI runs the adapters' end-to-end tests (``make install`` installs ``.[test]``)."""
    wanted = next(r for r in SERVER["optional-dependencies"]["test"]
                  if r.startswith("intentledger-client["))
    assert set(re.findall(r"\[([^]]*)]", wanted)[0].split(",")) == set(EXTRAS) - {"langchain"}


def test_the_client_says_it_is_typed() -> None:
    assert (CLIENT / "src" / "intentledger_client" / "py.typed").is_file()


def test_the_client_passes_mypy_strict() -> None:
    """Its configuration (``clients/python/pyproject.toml``: strict, its sources and tests)."""
    checked = subprocess.run([sys.executable, "-m", "mypy"], cwd=CLIENT, capture_output=True,
                             text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
