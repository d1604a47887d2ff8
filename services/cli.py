"""``intentledger``: the one command line for people and scripts.

Sub-commands stay thin: each parses its arguments and calls into a service's composition
root or ``shared.infra``; no behaviour lives here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid

from shared.config import Settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="intentledger", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    infra = commands.add_parser("infra", help="local Kafka and PostgreSQL without Docker")
    infra.add_argument("action", choices=["up", "down", "status"])
    infra.add_argument("--purge", action="store_true", help="with down: delete data and logs")

    commands.add_parser("migrate", help="apply every service's SQL migrations")

    serve = commands.add_parser("serve", help="run one service in the foreground")
    serve.add_argument("service", choices=["relay", "proposal-intake", "policy",
                                           "dispatcher", "wallet", "warehouse"])
    serve.add_argument("--log-level", default="INFO")

    commands.add_parser("demo", help="round-trip one event through outbox, relay and consumer")

    propose = commands.add_parser("propose", help="propose one tool call and print its outcome")
    propose.add_argument("--run", required=True, help="run id (created by its first proposal)")
    propose.add_argument("--principal", required=True)
    propose.add_argument("--tenant", required=True)
    propose.add_argument("--tool", required=True)
    propose.add_argument("--args", required=True, help="arguments as a JSON object")
    propose.add_argument("--tool-version")
    propose.add_argument("--key", help="caller-stated operation key")
    propose.add_argument("--call-id", default="cli-1")
    propose.add_argument("--timeout", type=float, default=30.0)

    approve = commands.add_parser("approve", help="grant a call awaiting approval")
    reject = commands.add_parser("reject", help="refuse a call awaiting approval")
    for decide in (approve, reject):
        decide.add_argument("logical_call_id", type=uuid.UUID)
        decide.add_argument("--approver", required=True, help="who decides (never the requester)")
        decide.add_argument("--reason")
    approve.add_argument("--ttl-seconds", type=float, default=900.0,
                         help="how long the grant stays valid")

    args = parser.parse_args(argv)
    settings = Settings()
    if args.command == "infra":
        return _infra(settings, args.action, args.purge)
    if args.command == "migrate":
        from services.registry import migrate_all

        for schema, applied in asyncio.run(migrate_all(settings)).items():
            print(f"{schema}: {', '.join(applied) if applied else 'up to date'}")
        return 0
    if args.command == "serve":
        from shared.logs import configure_logging

        configure_logging(args.log_level, service=args.service)
        if args.service == "relay":
            from services.relay.main import run_relay

            asyncio.run(run_relay(settings))
        elif args.service == "proposal-intake":
            from services.proposal_intake.main import run_intake

            asyncio.run(run_intake(settings))
        elif args.service == "policy":
            from services.policy.main import run_policy

            asyncio.run(run_policy(settings))
        elif args.service == "dispatcher":
            from services.dispatcher.main import run_dispatcher

            asyncio.run(run_dispatcher(settings))
        elif args.service == "wallet":
            from services.wallet.main import run_wallet

            asyncio.run(run_wallet(settings))
        else:
            from services.warehouse.main import run_warehouse

            asyncio.run(run_warehouse(settings))
        return 0
    if args.command == "demo":
        import logging

        from services.demo import run_demo

        logging.basicConfig(level=logging.WARNING)
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # start-up chatter, not news

        return asyncio.run(run_demo(settings))
    if args.command == "propose":
        return asyncio.run(_propose(settings, args))
    if args.command in ("approve", "reject"):
        return asyncio.run(_decide(settings, args))
    return 2


async def _propose(settings: Settings, args: argparse.Namespace) -> int:
    from shared.client import ProposalClient

    async with ProposalClient(settings.endpoints.kafka_bootstrap, run_id=args.run,
                              principal_id=args.principal, tenant_id=args.tenant) as client:
        outcome = await client.propose(args.tool, json.loads(args.args), call_id=args.call_id,
                                       tool_version=args.tool_version, operation_key=args.key,
                                       timeout=args.timeout)
    shown = {name: value for name, value in outcome.payload.items() if value is not None}
    print(json.dumps({"status": outcome.status, **shown}, indent=2))
    return {"accepted": 0, "duplicate": 0, "rejected": 3, "pending": 4}[outcome.status]


async def _decide(settings: Settings, args: argparse.Namespace) -> int:
    from services.policy.approve_cli import Answer, NotAwaitingApproval, send_answer

    answer = Answer(args.logical_call_id, args.approver, granted=args.command == "approve",
                    reason=args.reason, ttl_seconds=getattr(args, "ttl_seconds", 900.0))
    try:
        published = await send_answer(settings.endpoints, answer)
    except NotAwaitingApproval as refusal:
        print(f"intentledger: {refusal}", file=sys.stderr)
        return 1
    print(json.dumps(published, indent=2))
    return 0


def _infra(settings: Settings, action: str, purge: bool) -> int:
    from shared import infra

    try:
        if action == "up":
            endpoints = infra.up(settings)
            print(f"kafka:    {endpoints.kafka_bootstrap}\npostgres: {endpoints.database_url}")
        elif action == "down":
            infra.down(settings, purge=purge)
        else:
            print(json.dumps(infra.status(settings), indent=2))
    except infra.InfraError as missing:
        print(f"intentledger: {missing}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
