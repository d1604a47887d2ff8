"""The operator's commands: ``runs``, ``unknown`` and ``dlq`` read and resolve
(``services/query/cli.py``); ``runs cancel`` stops a run. And the one way every signed decision
(approve, reject, resolve, cancel) finds the person's key."""

from __future__ import annotations

import argparse
import json
import sys

from shared.config import Settings
from shared.terminal import printable

SIGNING_KEY_HELP = ("the signer's private JWK (default: $INTENTLEDGER_SIGNING_KEY or the file "
                    "$INTENTLEDGER_SIGNING_KEY_FILE names)")


def person_signer(path: str | None, principal_id: str):
    """The person's signer: their key from ``--signing-key`` or the environment; None (with
    the reason on stderr) when there is none, since an unsigned decision would count nothing."""
    from shared.identity.signatures import load_signing_key, signing_key_from_env
    from shared.operator.publish import Signer

    key = load_signing_key(path) if path else signing_key_from_env()
    if key is None:
        print("intentledger: no signing key: pass --signing-key FILE or set "
              "INTENTLEDGER_SIGNING_KEY(_FILE); an unsigned decision counts for nothing",
              file=sys.stderr)
        return None
    return Signer(key, principal_id)


def add_operator_commands(commands: argparse._SubParsersAction) -> None:
    """``runs``, ``unknown`` and ``dlq``: what an operator reads and resolves (services/query/cli.py),
    and ``runs cancel``, which stops a run."""
    runs = commands.add_parser("runs", help="list runs, or show one with its calls and timeline")
    runs_action = runs.add_subparsers(dest="action", required=True)
    runs_list = runs_action.add_parser("list", help="runs, ordered by run id")
    runs_list.add_argument("--tenant")
    runs_list.add_argument("--state", action="append", default=[], help="repeat for several")
    runs_show = runs_action.add_parser("show", help="a run, its calls and its timeline")
    runs_show.add_argument("run_id")
    runs_show.add_argument("--tenant", required=True,
                           help="the run's tenant (run ids are per tenant: two may share one)")
    runs_cancel = runs_action.add_parser(
        "cancel", help="stop a run: its calls not yet sent are refused run_cancelled, its calls "
                       "already sent settle with their true outcome")
    runs_cancel.add_argument("run_id")
    runs_cancel.add_argument("--tenant", required=True, help="the run's tenant")
    runs_cancel.add_argument("--operator", required=True,
                             help="who cancels (an operator of the run's tenant)")
    runs_cancel.add_argument("--reason", required=True, help="why, for the audit")
    runs_cancel.add_argument("--compensate", action="store_true",
                             help="also undo the run's done steps with their compensations")
    runs_cancel.add_argument("--timeout", type=float, default=60.0)
    runs_cancel.add_argument("--signing-key", metavar="FILE", help=SIGNING_KEY_HELP)
    unknown = commands.add_parser("unknown", help="the UNKNOWN queue, oldest first, with ages")
    unknown.add_argument("action", choices=["list"])
    unknown.add_argument("--tenant")
    dlq = commands.add_parser("dlq", help="dead letters of every service schema")
    dlq_action = dlq.add_subparsers(dest="action", required=True)
    dlq_list = dlq_action.add_parser("list", help="dead letters, oldest first")
    dlq_list.add_argument("--schema", help="one service schema")
    dlq_list.add_argument("--topic", help="records consumed from this topic")
    dlq_replay = dlq_action.add_parser("replay", help="re-publish one to its topic")
    dlq_replay.add_argument("schema")
    dlq_replay.add_argument("id", type=int)
    dlq_replay.add_argument("--force", action="store_true", help="replay again if replayed before")
    for listing in (runs_list, unknown, dlq_list):
        listing.add_argument("--limit", type=int, default=50)
        listing.add_argument("--after", help="the cursor printed after the previous page")
    for reading in (runs_list, runs_show, unknown, dlq_list):
        reading.add_argument("--json", action="store_true", help="JSON for scripts")


async def operator_command(settings: Settings, args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from services.query import cli
    from services.query.errors import QueryError
    from services.query.filters import CallFilters, DeadLetterFilters, RunFilters

    if (args.command, args.action) == ("runs", "show"):
        from shared.runs import RunKey

        return await cli.runs_show(settings, RunKey(args.tenant, args.run_id), args.json)
    if (args.command, args.action) == ("runs", "cancel"):
        return await _cancel(settings, args)
    if (args.command, args.action) == ("dlq", "replay"):
        return await cli.dlq_replay(settings, args.schema, args.id, args.force)
    page = {"limit": args.limit, "after": args.after}
    try:
        if args.command == "runs":
            filters = RunFilters(tenant=args.tenant, state=args.state, **page)
            return await cli.runs_list(settings, filters, args.json)
        if args.command == "unknown":
            return await cli.unknown_list(settings, CallFilters(tenant=args.tenant, **page), args.json)
        filters = DeadLetterFilters(schema_name=args.schema, topic=args.topic, **page)
        return await cli.dlq_list(settings, filters, args.json)
    except ValidationError as invalid:
        print("intentledger: " + "; ".join(f"--{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                           for e in invalid.errors()), file=sys.stderr)
        return 2
    except QueryError as invalid:
        print(f"intentledger: {invalid.message}", file=sys.stderr)
        return 2


async def _cancel(settings: Settings, args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from services.dispatcher.settings import DispatcherSettings
    from shared.operator.cancel import cancel_run
    from shared.runs import RunKey

    if (signer := person_signer(args.signing_key, args.operator)) is None:
        return 2
    try:
        verdict = await cancel_run(settings.endpoints, RunKey(args.tenant, args.run_id),
                                   reason=args.reason, compensate=args.compensate,
                                   topic=DispatcherSettings().resolutions_topic, signer=signer,
                                   timeout_s=args.timeout)
    except ValidationError as refusal:
        print(f"intentledger: {printable(str(refusal))}", file=sys.stderr)
        return 2
    print(json.dumps(verdict, indent=2))
    return 0 if verdict["status"] == "applied" else 1
