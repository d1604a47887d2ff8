"""What the deployment files (Dockerfile, docker-compose.yml) are checked against: the command
line and the settings the code defines, read from the code itself so the files cannot drift."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import pkgutil
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pydantic import AliasChoices
from pydantic_settings import BaseSettings

ROOT = Path(__file__).resolve().parents[2]

#: Processes a deployment runs from the image: the services, the migrations before them and
#: (compose) the one-shot that generates the policy's capability key.
DEPLOYED_COMMANDS = ("serve", "migrate", "keys")

HEALTH_PORT = 8081
"""The ``INTENTLEDGER_HEALTH_PORT`` the image sets (unset elsewhere: no health endpoints)."""


class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


@dataclass(frozen=True)
class Grammar:
    """``intentledger``'s argument parser, as ``intentledger.cli.main`` builds it."""

    parser: argparse.ArgumentParser

    @property
    def commands(self) -> dict[str, argparse.ArgumentParser]:
        return _subcommands(self.parser)

    @property
    def serve_choices(self) -> tuple[str, ...]:
        service = next(action for action in self.commands["serve"]._actions
                       if action.dest == "service")
        return tuple(service.choices)

    def error(self, argv: list[str]) -> str | None:
        """Why ``intentledger <argv>`` would be refused, or None when it parses."""
        stderr = io.StringIO()
        try:
            with contextlib.redirect_stderr(stderr):
                _ORIGINAL_PARSE(self.parser, list(argv))
        except SystemExit as refused:
            return stderr.getvalue().strip().splitlines()[-1] if refused.code else "prints help"
        return None


_ORIGINAL_PARSE = argparse.ArgumentParser.parse_args


@cache
def cli_grammar() -> Grammar:
    """Build the real parser by running ``main`` up to the moment it would parse."""
    from intentledger import cli

    def capture(parser: argparse.ArgumentParser, *args, **kwargs):
        raise _Captured(parser)

    argparse.ArgumentParser.parse_args = capture
    try:
        cli.main([])
    except _Captured as captured:
        return Grammar(captured.parser)
    finally:
        argparse.ArgumentParser.parse_args = _ORIGINAL_PARSE
    raise AssertionError("intentledger.cli.main never parsed its arguments")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@cache
def settings_classes() -> tuple[type[BaseSettings], ...]:
    """Every settings class of the code base (each service's ``settings.py`` and every shared
    module: health, telemetry and Kafka security settings live beside what they configure)."""
    import downstreams
    import services
    import shared

    for module in pkgutil.walk_packages(shared.__path__, "shared."):
        importlib.import_module(module.name)
    for package in (services, downstreams):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if module.name.endswith(".settings"):
                importlib.import_module(module.name)
    found, pending = [], list(BaseSettings.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__.startswith(("services.", "shared.")):
            found.append(cls)
    return tuple(sorted(set(found), key=lambda cls: cls.__qualname__))


@cache
def known_env_names() -> frozenset[str]:
    """``INTENTLEDGER_*`` names some code reads: settings fields (and their aliases), and names
    read directly from ``os.environ``."""
    names: set[str] = set()
    for cls in settings_classes():
        prefix = cls.model_config.get("env_prefix", "")
        for name, field in cls.model_fields.items():
            if isinstance(field.validation_alias, AliasChoices):
                names.update(str(choice).upper() for choice in field.validation_alias.choices)
            elif isinstance(field.validation_alias, str):  # the alias replaces the prefixed name
                names.add(field.validation_alias.upper())
            else:
                names.add(f"{prefix}{name}".upper())
    for source in [*ROOT.joinpath("services").rglob("*.py"), *ROOT.joinpath("shared").rglob("*.py")]:
        names.update(re.findall(r"\bINTENTLEDGER_[A-Z0-9_]*[A-Z0-9]\b", source.read_text("utf-8")))
    return frozenset(names)


def unread_env_names(env: dict[str, object]) -> list[str]:
    return sorted(name for name in env if name.startswith("INTENTLEDGER_")
                  and name not in known_env_names())


def seconds(duration: str | int | float) -> float:
    """A Compose/Go duration (``1m30s``, ``500ms``, ``30s``) in seconds."""
    if isinstance(duration, int | float):
        return float(duration)
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise ValueError(f"not a duration: {duration!r}")
    return sum(float(n) * units[u] for n, u in parts)


def defaults(cls: type[BaseSettings]) -> BaseSettings:
    """The code's defaults, whatever this shell exports."""
    return cls.model_construct()


@cache
def example_tool_topics() -> frozenset[str]:
    from shared.tools import load_registry

    registry = load_registry(ROOT / "config" / "tools.example.yaml")
    return frozenset(tool.topic for tool in registry.tools if tool.adapter == "kafka")


def family(name: str) -> str:
    """A per-tenant family of topics as the topology's ``Topic.address`` writes it."""
    return f"{name}.{{tenant}}"


@cache
def consumers() -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """Per consuming service, from its settings' defaults: (the topics it consumes, the topics
    its outbox names; the dispatcher's include the example registry's tool topics, the
    results family is ``agent.results.{tenant}``)."""
    from downstreams.wallet.settings import WalletSettings
    from downstreams.warehouse.settings import WarehouseSettings
    from services.dispatcher.settings import DispatcherSettings
    from services.policy.settings import PolicySettings
    from services.projection.settings import ProjectionSettings
    from services.proposal_intake.settings import IntakeSettings

    intake, policy = defaults(IntakeSettings), defaults(PolicySettings)
    dispatcher, projection = defaults(DispatcherSettings), defaults(ProjectionSettings)
    wallet, warehouse = defaults(WalletSettings), defaults(WarehouseSettings)
    table = {
        "proposal-intake": ({intake.proposals_topic}, {family(intake.results_family),
                                                       intake.intake_topic}),
        "policy": ({policy.intake_topic, policy.approvals_topic, policy.compensations_topic,
                    policy.resolutions_topic},
                   {policy.authorizations_topic, family(policy.results_family)}),
        "dispatcher": ({dispatcher.authorizations_topic, dispatcher.reply_topic,
                        dispatcher.resolutions_topic},
                       {dispatcher.dispatch_topic, dispatcher.effects_topic,
                        dispatcher.compensations_topic, family(dispatcher.results_family),
                        *example_tool_topics()}),
        "projection": (set(projection.ledger_topics), set()),
        "wallet": ({wallet.request_topic}, {wallet.reply_topic}),
        "warehouse": ({warehouse.request_topic}, {warehouse.reply_topic}),
    }
    return {name: (frozenset(consumed), frozenset(emitted))
            for name, (consumed, emitted) in table.items()}
