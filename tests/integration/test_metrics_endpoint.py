"""``/metrics`` of the real service processes, after real work: a debit proposed as an agent
sends it goes through the intake, the policy, the dispatcher, the wallet, the projection and
the relay, each a separate ``intentledger serve`` process on its health port. Scraped over
HTTP, every process serves its metrics under the documented names with the outcome of that
work, and together they serve every metric the dashboards and the alert rules query."""

from __future__ import annotations

import asyncio
import json
import uuid

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from shared import metric_catalog
from tests.integration.test_service_runtime import environments, ready
from tests.support.dispatch import settled
from tests.support.ports import free_port
from tests.support.identities import fresh_principal
from tests.support.kafka import wait_for
from tests.support.pipeline import answer, debit, names, propose
from tests.support.pipeline_stack import SCHEMAS, pipeline_stage
from tests.support.processes import ServiceProcess
from tests.support.wallet import new_wallet
from tests.support.monitoring import dashboard_queries, rule_queries
from tests.support.promql import metric_names

pytestmark = pytest.mark.infra

SERVICES = ("relay", "proposal-intake", "policy", "dispatcher", "wallet", "projection")
Samples = list[tuple[str, dict[str, str], float]]


async def scrape(port: int) -> Samples:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session, \
            session.get(f"http://127.0.0.1:{port}/metrics") as response:
        assert response.status == 200
        text = await response.text()
    return [(sample.name, sample.labels, sample.value)
            for family in text_string_to_metric_families(text) for sample in family.samples]


def value(samples: Samples, name: str, **labels: str) -> float:
    return sum(v for n, have, v in samples
               if n == name and all(have.get(k) == want for k, want in labels.items()))


async def test_every_process_serves_its_metrics_under_the_documented_names(pool, endpoints, tmp_path):
    stage = await pipeline_stage(pool, endpoints, tmp_path)
    env = environments(stage, "unused") | {
        "relay": {"INTENTLEDGER_RELAY_SCHEMAS": json.dumps(list(SCHEMAS)),
                  "INTENTLEDGER_RELAY_POLL_INTERVAL_S": "0.2"}}
    ports = {service: free_port() for service in SERVICES}
    processes = [ServiceProcess(service, endpoints, tmp_path / f"{service}.log",
                                env={**env[service], "INTENTLEDGER_HEALTH_PORT": str(port)}).start()
                 for service, port in ports.items()]
    try:
        for service, port in ports.items():
            assert await ready(port), f"{service} never ready; see {tmp_path / service}.log"
        run_id, _ = names()
        wallet_id = await new_wallet(pool, 10_000)
        await propose(stage, debit(run_id, fresh_principal(), wallet_id, "40.00", call_id="call-1",
                                   key="order-1"))
        call_id = uuid.UUID((await answer(pool, stage, run_id, "call-1"))["payload"]["logical_call_id"])
        assert await settled(pool, call_id) == "SUCCEEDED"

        async def projected() -> dict[str, Samples] | None:
            scraped = dict(zip(ports, await asyncio.gather(*map(scrape, ports.values())), strict=True))
            done = value(scraped["projection"], "consumer_applied_total", consumer="projection") >= 4
            return scraped if done else None
        scraped = await wait_for(projected, timeout=60, interval=1.0)
        assert scraped is not None, "the projection never applied the call's events"
    finally:  # every process stopped before any is judged: none may run on into later tests
        exits = {process.log_path: await asyncio.to_thread(process.stop) for process in processes}
        assert [log for log, status in exits.items() if status != 0] == []

    dispatcher, policy = scraped["dispatcher"], scraped["policy"]
    intents = value(dispatcher, "dispatcher_intents_total", tool="wallet.debit")
    assert intents >= 1
    assert value(dispatcher, "dispatcher_attempts_sent_total", tool="wallet.debit") == intents
    assert value(dispatcher, "dispatcher_outcomes_unknown_total", tool="wallet.debit") == 0, \
        "a counter that has not happened is served at 0, so increase() sees its first incident"
    assert value(policy, "outbox_emitted_total", schema="policy",
                 event_type="AuthorizationAllowed") >= 1
    assert value(policy, "consumer_applied_total", consumer="policy") >= 1
    assert value(scraped["wallet"], "consumer_delivery_latency_milliseconds_count",
                 consumer="wallet") >= 1
    assert value(scraped["relay"], "relay_published_total") >= 5
    assert value(scraped["relay"], "relay_publish_lag_milliseconds_count") >= 5
    for service in SERVICES:
        assert value(scraped[service], "target_info", service_name=service) == 1

    served = {name for samples in scraped.values() for name, _, _ in samples}
    catalogued = {series for metric in metric_catalog.CATALOG for series in metric.series}
    queried = set().union(*map(metric_names, {**dashboard_queries(), **rule_queries()}.values()))
    assert queried <= served, f"queried but never served: {queried - served}"
    ours = {name for name in served if name.split("_")[0] in {
        "consumer", "relay", "dispatcher", "outbox", "intake"}}
    assert ours <= catalogued, f"served but not documented: {ours - catalogued}"
