"""``intentledger``: the one command line for people and scripts.

Sub-commands stay thin: each parses its arguments and calls into a service's composition
root or ``shared.infra``; no behaviour lives here.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys
import uuid
from pathlib import Path

from intentledger import __version__
from intentledger.audit_cli import add_audit_command, audit_command
from intentledger.operator_cli import (SIGNING_KEY_HELP, add_operator_commands, operator_command,
                                       person_signer)
from shared.config import Settings
from shared.terminal import printable


SERVED = {
    "relay": ("services.relay.main", "run_relay"),
    "proposal-intake": ("services.proposal_intake.main", "run_intake"),
    "policy": ("services.policy.main", "run_policy"),
    "dispatcher": ("services.dispatcher.main", "run_dispatcher"),
    "wallet": ("downstreams.wallet.main", "run_wallet"),
    "warehouse": ("downstreams.warehouse.main", "run_warehouse"),
    "query": ("services.query.main", "run_query"),
    "projection": ("services.projection.main", "run_projection"),
    "mcp-gateway": ("services.mcp_gateway.main", "run_mcp_gateway"),  # the `mcp` extra
}
"""What ``intentledger serve NAME`` runs: a composition root, imported only when served."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="intentledger", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"intentledger {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    infra = commands.add_parser("infra", help="local Kafka and PostgreSQL without Docker")
    infra.add_argument("action", choices=["up", "down", "status"])
    infra.add_argument("--purge", action="store_true", help="with down: delete data and logs")
    infra.add_argument("--secure", action="store_true",
                       help="with up: SCRAM logins and least-privilege ACLs "
                       "(docs/configuration.md)")

    commands.add_parser("migrate", help="apply every service's SQL migrations")

    serve = commands.add_parser("serve", help="run one service in the foreground")
    serve.add_argument("service", choices=list(SERVED))
    serve.add_argument("--log-level", default="INFO")

    commands.add_parser("demo", help="the stack as real processes, an agent's proposals, a crash "
                        "after a debit, authority at dispatch (docs/demo.md)")

    propose = commands.add_parser("propose", help="propose one tool call and print its outcome")
    propose.add_argument("--run", required=True, help="run id (created by its first proposal)")
    propose.add_argument("--principal", required=True)
    propose.add_argument("--tenant", required=True)
    propose.add_argument("--tool", required=True)
    propose.add_argument("--args", required=True, help="arguments as a JSON object")
    propose.add_argument("--tool-version")
    propose.add_argument("--key", help="caller-stated operation key")
    propose.add_argument("--signing-key", metavar="FILE", help=SIGNING_KEY_HELP)
    propose.add_argument("--call-id", default="cli-1")
    propose.add_argument("--timeout", type=float, default=30.0)

    approve = commands.add_parser("approve", help="grant a call awaiting approval")
    reject = commands.add_parser("reject", help="refuse a call awaiting approval")
    for decide in (approve, reject):
        decide.add_argument("logical_call_id", type=uuid.UUID)
        decide.add_argument("--approver", required=True, help="who decides (never the requester): "
                                                              "the principal the key signs as")
        decide.add_argument("--reason")
        decide.add_argument("--signing-key", metavar="FILE", help=SIGNING_KEY_HELP)
    resolve = commands.add_parser("resolve", help="settle by hand, with evidence, an intent "
                                                 "reconciliation left RECONCILING or in "
                                                 "MANUAL_REVIEW")
    resolve.add_argument("logical_call_id", type=uuid.UUID)
    resolve.add_argument("--outcome", required=True, choices=["succeeded", "failed"])
    resolve.add_argument("--operator", required=True, help="who resolves (named by the policy's "
                                                           "resolutions; never the call's principal)")
    resolve.add_argument("--reason", required=True)
    resolve.add_argument("--evidence", required=True, help="what you checked downstream")
    resolve.add_argument("--receipt", help="the downstream's id of the effect (succeeded)")
    resolve.add_argument("--result", type=json.loads, help="the result fields as JSON (succeeded)")
    resolve.add_argument("--timeout", type=float, default=60.0)
    resolve.add_argument("--signing-key", metavar="FILE", help=SIGNING_KEY_HELP)
    approve.add_argument("--ttl-seconds", type=float, default=900.0,
                         help="how long the grant stays valid")

    replay = commands.add_parser("replay", help="rebuild the read models from the event history "
                                 "and compare projection hashes")
    replay.add_argument("--run", help="one run (default: every run)")
    replay.add_argument("--verify", action="store_true",
                        help="exit 1 and print the first differing record on a mismatch")

    chaos = commands.add_parser("chaos", help="fault protocols: declared crash scenarios run "
                                "against the real stack")
    chaos_actions = chaos.add_subparsers(dest="chaos_action", required=True)
    chaos_run = chaos_actions.add_parser("run", help="run protocol files (or directories of them)")
    chaos_run.add_argument("files", nargs="+", help="fault-protocol JSON files or directories")
    chaos_run.add_argument("--json", action="store_true", help="print the reports as JSON")

    keys = commands.add_parser("keys", help="signing keys of principals")
    keys_actions = keys.add_subparsers(dest="keys_action", required=True)
    generate = keys_actions.add_parser("generate", help="a new private key (a JWK file) and the "
                                       "public entry for the principals file")
    generate.add_argument("--kid", required=True, help="the key's id, unique in the principals file")
    generate.add_argument("--curve", choices=["Ed25519", "P-256"], default="Ed25519")
    generate.add_argument("--out", required=True, help="where the private JWK is written (0600)")
    capability = keys_actions.add_parser("capability", help="the policy's capability signing key "
                                         "(a private JWK) and the public key set (JWKS) it joins")
    capability.add_argument("--kid", required=True, help="the key's id, e.g. policy-2026-12")
    capability.add_argument("--out", required=True, help="the private JWK, for the policy only")
    capability.add_argument("--public", required=True, help="the JWKS every verifier reads; "
                            "the new key is added to it (rotation)")
    capability.add_argument("--if-absent", action="store_true",
                            help="succeed without writing when --out exists (a one-shot init)")

    tenants = commands.add_parser("tenants", help="tenants' results topics")
    tenants_actions = tenants.add_subparsers(dest="tenants_action", required=True)
    tenants_add = tenants_actions.add_parser("add", help="create each tenant's results topic, "
                                             "agent.results.<tenant>, if missing")
    tenants_add.add_argument("tenants", nargs="+", help="tenant ids")
    tenants_add.add_argument("--replicas", type=int, default=1,
                             help="replication factor (3 in a production cluster)")

    tools = commands.add_parser("tools", help="the tool registry, for agents")
    tools_actions = tools.add_subparsers(dest="tools_action", required=True)
    tools_export = tools_actions.add_parser("export", help="the registry's tools as a model "
                                            "provider's tool definitions (JSON on stdout)")
    tools_export.add_argument("--format", required=True,
                              choices=["openai", "openai-responses", "anthropic", "mcp", "catalog"],
                              help="catalog: the neutral form clients export from")
    tools_export.add_argument("--registry", metavar="FILE",
                              help="a registry file (default: the intake's)")

    add_operator_commands(commands)
    add_audit_command(commands)

    args = parser.parse_args(argv)
    settings = Settings()
    if args.command == "infra":
        return _infra(settings, args.action, args.purge, args.secure)
    if args.command == "migrate":
        from shared.db.schemas import migrate_all

        for schema, applied in asyncio.run(migrate_all(settings)).items():
            print(f"{schema}: {', '.join(applied) if applied else 'up to date'}")
        return 0
    if args.command == "serve":
        from shared import event_loop
        from shared.logs import configure_logging

        configure_logging(args.log_level, service=args.service)
        module, runner = SERVED[args.service]
        event_loop.run(getattr(importlib.import_module(module), runner)(settings))
        return 0
    if args.command == "demo":
        import logging

        from intentledger.demo import run_demo

        logging.basicConfig(level=logging.WARNING)
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # start-up chatter, not news

        return asyncio.run(run_demo(settings))
    if args.command == "propose":
        return asyncio.run(_propose(settings, args))
    if args.command in ("approve", "reject"):
        return asyncio.run(_decide(settings, args))
    if args.command == "resolve":
        return asyncio.run(_resolve(settings, args))
    if args.command in ("runs", "unknown", "dlq"):
        return asyncio.run(operator_command(settings, args))
    if args.command == "audit":
        return asyncio.run(audit_command(settings, args))
    if args.command == "keys" and args.keys_action == "capability":
        return _generate_capability_key(args.kid, Path(args.out), Path(args.public),
                                        args.if_absent)
    if args.command == "keys":
        return _generate_key(args.kid, args.curve, args.out)
    if args.command == "tenants":
        return asyncio.run(_add_tenants(settings, args.tenants, args.replicas))
    if args.command == "tools":
        from intentledger.tool_definitions import export_command
        from intentledger_client.tools import NotExportable

        try:
            print(export_command(args.format, args.registry))
        except NotExportable as error:
            print(f"intentledger tools export: {error}", file=sys.stderr)
            return 2
        return 0
    if args.command == "chaos":
        from intentledger.chaos.cli import chaos_run

        return asyncio.run(chaos_run(settings, args.files, as_json_output=args.json))
    if args.command == "replay":
        from services.projection.replay_cli import replay_command

        return asyncio.run(replay_command(settings.endpoints, args.run, verify=args.verify))
    return 2


async def _propose(settings: Settings, args: argparse.Namespace) -> int:
    from intentledger_client import Client

    from shared.messaging.kafka_security import configured

    async with Client(settings.endpoints.kafka_bootstrap, principal_id=args.principal,
                      tenant_id=args.tenant, signing_key=args.signing_key,
                      kafka_options=configured().client_kwargs()) as client:
        outcome = await client.call(args.run, args.tool, json.loads(args.args),
                                    call_id=args.call_id, tool_version=args.tool_version,
                                    operation_key=args.key, wait=args.timeout, settle=False)
    answer = outcome.answer.model_dump(mode="json", exclude_none=True) if outcome.answer else {}
    status = outcome.answer.outcome if outcome.answer else "pending"
    print(json.dumps({"status": status, **answer}, indent=2))
    return {"accepted": 0, "duplicate": 0, "rejected": 3, "pending": 4}[status]


async def _decide(settings: Settings, args: argparse.Namespace) -> int:
    from services.policy.settings import PolicySettings
    from shared.operator.approve import Answer, NotAwaitingApproval, send_answer

    if (signer := person_signer(args.signing_key, args.approver)) is None:
        return 2
    answer = Answer(args.logical_call_id, granted=args.command == "approve",
                    reason=args.reason, ttl_seconds=getattr(args, "ttl_seconds", 900.0))
    try:
        published = await send_answer(settings.endpoints, answer,
                                      topic=PolicySettings().approvals_topic, signer=signer)
    except NotAwaitingApproval as refusal:
        print(f"intentledger: {printable(str(refusal))}", file=sys.stderr)
        return 1
    print(json.dumps(published, indent=2))
    return 0


async def _resolve(settings: Settings, args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from services.dispatcher.settings import DispatcherSettings
    from shared.operator.resolve import NoSuchIntent, ResolutionRequest, resolve

    if (signer := person_signer(args.signing_key, args.operator)) is None:
        return 2
    resolution = ResolutionRequest(args.logical_call_id, args.outcome, args.reason,
                                   args.evidence, args.receipt, args.result)
    try:
        verdict = await resolve(settings.endpoints, resolution, timeout_s=args.timeout,
                                topic=DispatcherSettings().resolutions_topic, signer=signer)
    except (NoSuchIntent, ValidationError) as refusal:
        print(f"intentledger: {printable(str(refusal))}", file=sys.stderr)
        return 2
    print(json.dumps(verdict, indent=2))
    return 0 if verdict["status"] == "applied" else 1


def _generate_capability_key(kid: str, out: Path, public: Path, if_absent: bool) -> int:
    from shared.identity.capability_keys import generate

    if if_absent and out.exists():
        print(f"intentledger: {out} exists; kept")
        return 0
    try:
        generate(out, public, kid)
    except FileExistsError:
        print(f"intentledger: {out} exists; a key is never overwritten", file=sys.stderr)
        return 1
    print(f"intentledger: capability key {kid} written to {out}; its public half is in {public}")
    return 0


def _generate_key(kid: str, curve: str, out: str) -> int:
    """Writes the private key where only its owner reads it; prints what the principals file
    lists (the public half), for the platform team to add."""
    import yaml

    from shared.identity.signatures import generate_signing_key, save_signing_key

    key = generate_signing_key(kid, curve)
    try:
        save_signing_key(key, out)
    except FileExistsError:
        print(f"intentledger: {out} exists; a key is never overwritten", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"intentledger: cannot write {out}: {error.strerror}", file=sys.stderr)
        return 1
    print(yaml.safe_dump([{"kid": kid, "jwk": key.as_dict(private=False)}], sort_keys=False),
          end="")
    return 0


async def _add_tenants(settings: Settings, tenants: list[str], replicas: int) -> int:
    from intentledger.tenants import NotATenant, add_tenants

    try:
        added = await add_tenants(settings.endpoints.kafka_bootstrap, tenants, replicas)
    except NotATenant as refused:
        print(f"intentledger: {refused}", file=sys.stderr)
        return 2
    for topic, created in added.items():
        print(f"{topic}: {'created' if created else 'exists'}")
    return 0


def _infra(settings: Settings, action: str, purge: bool, secure: bool) -> int:
    from shared import infra

    try:
        if action == "up":
            if secure:
                from intentledger import secure_kafka

                endpoints = infra.up(settings, secure=secure_kafka.plan(SERVED))
            else:
                endpoints = infra.up(settings)
            print(f"kafka:    {endpoints.kafka_bootstrap}\npostgres: {endpoints.database_url}")
        elif action == "down":
            from intentledger.demo import console as demo_console

            if demo_console.stop(settings):
                print("infra: stopped the demo's console")
            infra.down(settings, purge=purge)
        else:
            print(json.dumps(infra.status(settings), indent=2))
    except infra.InfraError as missing:
        print(f"intentledger: {missing}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
