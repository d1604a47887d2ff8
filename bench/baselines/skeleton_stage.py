"""One process of the skeleton pipeline (``skeleton.py``): the project's own consuming runtime
(``shared.messaging.consumer_service.serve``: the subscription, the inbox, the outbox, the
coalesced offset commits) with a handler that does no work but forward each event it applies
to the next topic of the proposal's path.

    python -m bench.baselines.skeleton_stage --stage dispatcher --nonce NONCE

The stages are the pipeline's consuming processes, with the topics they read and write in the
same shape: on a proposal's path the intake, the policy, the dispatcher (which reads twice: the
policy's allowance, then the wallet's answer) and the wallet; off it the projection, which
reads four of the path's topics, writes no event and gathers its fetches as the real one does
by default (``services/projection/settings.py``). Each applies a batch in one transaction of the
services' own form (inbox markers, outbox rows, commit), so what a skeleton proposal costs is
what the hops cost before any service does its work.
"""

from __future__ import annotations

import argparse
import uuid

import asyncpg

from bench.baselines._common import scratch_outbox
from services.projection.settings import ProjectionSettings
from shared import event_loop
from shared.config import Settings
from shared.db.schemas import expect_migrated
from shared.db.unit_of_work import UnitOfWork
from shared.logs import configure_logging
from shared.messaging.consumer_service import ConsumerService, serve
from shared.messaging.envelope import Envelope
from shared.messaging.routes import Router
from shared.messaging.subscription import Gathering
from shared.signals import stop_on_signals

PATH = ("proposed", "accepted", "allowed", "requested", "answered", "settled")
"""The topics a skeleton proposal crosses, in order: the agent writes the first, the driver
reads the last, and each stage forwards from one to the next."""
STAGES = {"intake": ("proposed",), "policy": ("accepted",),
          "dispatcher": ("allowed", "answered"), "wallet": ("requested",),
          "projection": ("accepted", "allowed", "answered", "settled")}
"""Which topics of ``PATH`` each stage reads; each but the projection writes the one after
each it reads."""
READ_MODELS = frozenset({"projection"})
"""Stages that forward nothing."""
_PROJECTION = ProjectionSettings.model_fields
PROJECTION_GATHERING = Gathering(max_wait_ms=_PROJECTION["fetch_max_wait_ms"].default,
                                 min_bytes=_PROJECTION["fetch_min_bytes"].default)
"""The real projection's shipped defaults."""


def topic(nonce: str, step: str) -> str:
    return f"bench.skeleton-{nonce}.{step}"


def event_type(step: str) -> str:
    return f"Skeleton{step.title()}"


def schema(nonce: str, stage: str) -> str:
    return f"bench_skeleton_{nonce}_{stage}"


def _next(step: str) -> str:
    return PATH[PATH.index(step) + 1]


def stage_service(nonce: str, stage: str) -> ConsumerService:
    reads = STAGES[stage]
    routes = {topic(nonce, step): {event_type(step): None} for step in reads}
    forwards = stage not in READ_MODELS
    return ConsumerService(name=f"bench-skeleton-{nonce}-{stage}", schema=schema(nonce, stage),
                           routes=Router(routes),
                           writes=tuple(topic(nonce, _next(step)) for step in reads if forwards),
                           crash_point=f"bench.skeleton.{stage}.after_commit", set_wise=True,
                           gathering=Gathering() if forwards else PROJECTION_GATHERING)


def forwarding(nonce: str, stage: str):
    """The stage's handler: each fresh event becomes the next step's, with the same payload."""
    following = {} if stage in READ_MODELS else {event_type(step): _next(step)
                                                 for step in STAGES[stage]}

    async def forward(uow: UnitOfWork, events: list[Envelope]) -> set[uuid.UUID] | None:
        if not following:
            return None
        for event in events:
            step = following[event.event_type]
            uow.emit(topic(nonce, step), Envelope.new(
                event_type=event_type(step), run_id=event.run_id,
                producer=f"bench-skeleton-{stage}", payload=event.payload, causation=event))
        return None

    return forward


async def run(nonce: str, stage: str) -> None:
    service = stage_service(nonce, stage)

    async def prepare(pool: asyncpg.Pool) -> None:
        async with pool.acquire() as conn:
            await scratch_outbox(conn, service.schema)  # made already when the driver runs it

    await serve(service, Settings(), forwarding(nonce, stage), prepare=prepare,
                migrated=lambda pool: expect_migrated(pool, service.schema, messaging_only=True),
                stopping=stop_on_signals())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", choices=STAGES, required=True)
    parser.add_argument("--nonce", required=True)
    arguments = parser.parse_args()
    configure_logging("INFO", service=f"skeleton-{arguments.stage}")  # "started": ready
    event_loop.run(run(arguments.nonce, arguments.stage))


if __name__ == "__main__":
    main()
