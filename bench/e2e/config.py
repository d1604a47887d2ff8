"""The command line: every setting of a run, parsed and checked into one ``Config``."""

from __future__ import annotations

import argparse
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import bench.e2e
from bench.e2e.pipeline import ROOT, SERVICES

FULL_RATES = (10, 15, 20, 25, 30, 40, 50, 60, 70, 80, 90, 100, 150, 200, 400, 800, 1600, 2400, 3200)
"""Fine where the pipeline is now (tens per second: 2 cores), coarse beyond."""
QUICK_RATES = (25, 50, 100, 200)
HEADLINE_RATE = 10
"""The offered rate of the latency phase: low load, where issue 22 states its targets
(``LATENCY_TARGETS_MS``) and where latency is the pipeline's waits and hops, not queueing.
Until 2026-12-05 it was 100/s, a rate beyond what 2 cores sustain, so the run's headline
p50 was a queue's length (9.1 s in the run of that day)."""
LATENCY_TARGETS_MS = (35, 100)
"""Issue 22's p50 and p99 from publish to settled at ``HEADLINE_RATE``."""
CLIENT_RATE = 10
"""The offered rate of the client phase: an agent's low load, where the latency it sees is
waits and hops rather than queueing."""
FORMATS = {"generic", "openai.chat", "openai.responses", "anthropic"}


@dataclass
class Config:
    rates: list[int]
    step_s: float
    grace_s: float
    drain_s: float
    warmup_s: float
    calls_per_run: int
    active_runs: int
    wallets: int
    formats: list[str]
    max_p99_ms: float
    max_backlog_s: float
    abort_backlog_s: float
    replicas: dict[str, int]
    env: dict[str, dict[str, str]]
    out: Path
    profile_rate: int | None
    profile_s: float
    """How long ``--profile-rate`` and ``--transactions-rate`` watch their step."""
    baselines: bool
    quick: bool
    unsigned: bool = False
    """Proposals unsigned (the intake in development mode for the benchmark's tenant): the
    baseline that signing and verifying are measured against."""
    latency_rate: int = HEADLINE_RATE
    latency_s: float = 60.0
    preload: int = 0
    """Settled proposals of history loaded after the fresh ramp, before the same ramp again
    (``history``)."""
    transactions_rate: int | None = None
    """The ramp's step during which PostgreSQL logs every statement (``transactions``)."""
    tenants: int = 1
    """How many tenants offer the load at once (``tenancy``), each with its own principal,
    wallets, results topic and policy rules."""
    client_rate: int = CLIENT_RATE
    """The client phase's rate (0: none): proposals through ``intentledger_client.Client``,
    for ``latency_s``."""


def parse_config(argv: list[str] | None = None) -> Config:
    usage = bench.e2e.__doc__.splitlines()  # the package's documentation is the help text
    parser = argparse.ArgumentParser(prog="python -m bench.e2e", description=usage[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(usage[1:6]))
    parser.add_argument("--quick", action="store_true",
                        help="smoke: 10 s steps, rates 25,50,100,200/s, no baselines unless asked")
    parser.add_argument("--rates", help=f"offered rates per step (default {FULL_RATES})")
    parser.add_argument("--step-seconds", type=float, help="length of each step (default 60)")
    parser.add_argument("--latency-rate", type=int, default=HEADLINE_RATE,
                        help="offered rate of the latency phase, after the ramp (0: none)")
    parser.add_argument("--latency-seconds", type=float,
                        help="length of the latency phase (default: the step length)")
    parser.add_argument("--client-rate", type=int, default=CLIENT_RATE,
                        help="offered rate of the client phase, calls through the thin client "
                             "timed to their settled outcome, after the latency phase (0: none)")
    parser.add_argument("--preload", type=int, default=0, metavar="N",
                        help="after the ramp, load N settled proposals of history and run the "
                             "ramp again on it (bench/e2e/history.py)")
    parser.add_argument("--grace-seconds", type=float, default=5.0,
                        help="a step is judged this long after it ended")
    parser.add_argument("--drain-seconds", type=float, help="longest wait for the stack to drain")
    parser.add_argument("--warmup-seconds", type=float, default=3.0)
    parser.add_argument("--calls-per-run", type=int, default=10)
    parser.add_argument("--active-runs", type=int, default=256)
    parser.add_argument("--wallets", type=int, default=1000,
                        help="wallets in all, shared out among the tenants")
    parser.add_argument("--tenants", type=int, default=1,
                        help="tenants offering the load at once, each with its own principal, "
                             "wallets, results topic and policy rules")
    parser.add_argument("--formats", default="generic,openai.chat",
                        help="proposal formats, taken in turn (generic, openai.chat, "
                             "openai.responses, anthropic)")
    parser.add_argument("--max-p99-ms", type=float, default=1000.0)
    parser.add_argument("--max-backlog-s", type=float, default=2.0)
    parser.add_argument("--abort-backlog-s", type=float, default=15.0)
    parser.add_argument("--replicas", action="append", default=[], metavar="SERVICE=N")
    parser.add_argument("--env", action="append", default=[],
                        metavar="SERVICE:INTENTLEDGER_NAME=VALUE",
                        help="a setting for one service's processes (tuning experiments)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--profile-rate", type=int,
                        help="py-spy every service during the step of this rate")
    parser.add_argument("--profile-seconds", type=float, default=20.0)
    parser.add_argument("--transactions-rate", type=int,
                        help="during the step of this rate, each service's transactions from "
                             "PostgreSQL's statement log: span, execution, gaps")
    parser.add_argument("--baselines", dest="baselines", action="store_true", default=None,
                        help="measure the baselines and the peer (default: yes, unless --quick)")
    parser.add_argument("--no-baselines", dest="baselines", action="store_false")
    parser.add_argument("--unsigned", action="store_true",
                        help="send proposals unsigned, to measure what signatures cost")
    args = parser.parse_args(argv)
    rates = [int(r) for r in args.rates.split(",")] if args.rates else \
        list(QUICK_RATES if args.quick else FULL_RATES)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    if not formats or set(formats) - FORMATS:
        raise SystemExit(f"--formats: choose from {sorted(FORMATS)}")
    step_s = args.step_seconds or (10.0 if args.quick else 60.0)
    return Config(
        rates=rates, step_s=step_s, grace_s=args.grace_seconds,
        drain_s=args.drain_seconds or (120.0 if args.quick else 900.0),
        warmup_s=args.warmup_seconds, calls_per_run=args.calls_per_run,
        active_runs=args.active_runs, wallets=args.wallets, formats=formats,
        max_p99_ms=args.max_p99_ms, max_backlog_s=args.max_backlog_s,
        abort_backlog_s=args.abort_backlog_s, replicas=_parse_replicas(args.replicas),
        env=_parse_env(args.env), out=args.out, profile_rate=args.profile_rate,
        profile_s=args.profile_seconds, transactions_rate=args.transactions_rate,
        baselines=args.baselines if args.baselines is not None else not args.quick,
        quick=args.quick, unsigned=args.unsigned, latency_rate=args.latency_rate,
        client_rate=args.client_rate, preload=args.preload, tenants=args.tenants,
        latency_s=args.latency_seconds or step_s)


def _parse_replicas(values: list[str]) -> dict[str, int]:
    replicas = {}
    for value in values:
        service, _, count = value.partition("=")
        if service not in SERVICES or not count.isdigit() or int(count) < 1:
            raise SystemExit(f"--replicas {value!r}: expected SERVICE=N with SERVICE in {SERVICES}")
        replicas[service] = int(count)
    return replicas


def _parse_env(values: list[str]) -> dict[str, dict[str, str]]:
    env: dict[str, dict[str, str]] = defaultdict(dict)
    for value in values:
        service, _, assignment = value.partition(":")
        name, _, setting = assignment.partition("=")
        if service not in SERVICES or not name.startswith("INTENTLEDGER_"):
            raise SystemExit(f"--env {value!r}: expected SERVICE:INTENTLEDGER_NAME=VALUE")
        env[service][name] = setting
    return dict(env)
