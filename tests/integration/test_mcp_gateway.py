"""The MCP gateway, driven by the official MCP SDK's own client over streamable HTTP, in front
of the whole pipeline (intake, policy, dispatcher, wallet, projection, relay) on real Kafka and
PostgreSQL: each caller is listed only what its policy could allow; a call takes effect once
and answers with the settled result; a retry after a dropped connection is answered from the
one intent; a denied call says why; a call awaiting approval is answered pending with a handle
and fetched once approved; a token for another audience is refused; a local client starts the
gateway on stdio as its configured caller."""

from __future__ import annotations

import json
import secrets
import sys
import uuid

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from services.mcp_gateway.calls import run_for
from services.mcp_gateway.callers import Caller
from tests.conftest import ROOT
from tests.support.identities import fresh_principal, local
from tests.support.agents import policy
from tests.support.mcp_gateway import ISSUER, key_meta, mcp, running_gateway
from tests.support.pipeline import answer, approve
from tests.support.pipeline_stack import pipeline, pipeline_stage
from tests.support.wallet import balance, debits, new_wallet

pytestmark = pytest.mark.infra


@pytest.fixture
async def stage(pool, endpoints, tmp_path):
    return await pipeline_stage(pool, endpoints, tmp_path)


@pytest.fixture
async def gateway(stage):
    async with running_gateway(stage) as gateway:
        yield gateway


async def test_each_caller_is_listed_only_the_tools_its_policy_could_allow(gateway):
    async with mcp(gateway, gateway.tokens[gateway.payer]) as payer:
        listed_to_payer = {tool.name for tool in (await payer.list_tools()).tools}
        with pytest.raises(MCPError) as unknown:
            await payer.call_tool("inventory.reserve", {"sku": "S", "order_id": "o", "quantity": 1})
    async with mcp(gateway, gateway.tokens[gateway.stocker]) as stocker:
        listed_to_stocker = {tool.name for tool in (await stocker.list_tools()).tools}
    async with mcp(gateway, gateway.jwt(gateway.payer)) as by_jwt:
        tools = {tool.name: tool for tool in (await by_jwt.list_tools()).tools}
    assert listed_to_payer == {"wallet.debit", "intentledger.outcome"}
    assert "inventory.reserve" in listed_to_stocker and "wallet.debit" not in listed_to_stocker
    assert set(tools) == listed_to_payer, "a JWT for the same principal sees the same tools"
    assert tools["wallet.debit"].output_schema["properties"].keys() >= {"debit_id", "balance_minor"}
    assert unknown.value.code == -32602, "a tool not offered is unknown, not forbidden"


async def test_a_call_takes_effect_once_and_answers_with_the_settled_result(
        gateway, stage, pool):
    wallet_id = await new_wallet(pool, 10_000)
    key = f"order-{uuid.uuid4().hex[:10]}:pay"
    async with pipeline(stage), mcp(gateway, gateway.tokens[gateway.payer]) as client:
        result = await client.call_tool(
            "wallet.debit", {"wallet_id": wallet_id, "amount": "40.00", "currency": "EUR"},
            meta=key_meta(key))
    assert not result.is_error, result.content[0].text
    assert result.structured_content["balance_minor"] == 6_000
    assert json.loads(result.content[0].text) == result.structured_content
    assert await balance(pool, wallet_id) == 6_000 and await debits(pool, wallet_id) == 1
    run = run_for(Caller(gateway.payer, "acme"), key)
    recorded = await pool.fetchval(
        "SELECT envelope FROM proposal_intake.outbox WHERE topic = $1"
        " AND envelope->'payload'->>'run_id' = $2", stage.intake, run)
    intent = json.loads(recorded)["payload"]
    assert (intent["principal_id"], intent["signed_by"]) == (gateway.payer, "mcp-gateway")


async def test_a_retry_after_a_dropped_connection_is_answered_from_the_one_intent(
        gateway, stage, pool):
    """The first call is in flight (nothing settles it yet) when the client drops; its retry,
    on a new connection with the same operation key, is answered once the pipeline runs."""
    wallet_id = await new_wallet(pool, 10_000)
    key = f"order-{uuid.uuid4().hex[:10]}:pay"
    debit = {"wallet_id": wallet_id, "amount": "25.00", "currency": "EUR"}
    with anyio.move_on_after(3) as dropped:
        async with mcp(gateway, gateway.tokens[gateway.payer]) as client:
            await client.call_tool("wallet.debit", debit, meta=key_meta(key))
    assert dropped.cancelled_caught, "the first call must still be in flight when dropped"
    async with pipeline(stage), mcp(gateway, gateway.tokens[gateway.payer]) as client:
        retried = await client.call_tool("wallet.debit", debit, meta=key_meta(key))
    assert retried.structured_content["balance_minor"] == 7_500
    assert await debits(pool, wallet_id) == 1
    run = run_for(Caller(gateway.payer, "acme"), key)
    outcomes = await pool.fetch(
        "SELECT envelope->'payload'->>'outcome' AS outcome FROM proposal_intake.outbox"
        " WHERE topic = $1 AND envelope->'payload'->>'run_id' = $2", stage.results_topic(), run)
    assert sorted(row["outcome"] for row in outcomes) == ["accepted", "duplicate"], \
        "the dropped call was proposed; its retry met the same intent"


async def test_a_model_stating_the_key_as_an_argument_retries_without_a_second_effect(
        gateway, stage, pool):
    """What a client that cannot set _meta sends (the model fills in every argument)."""
    wallet_id = await new_wallet(pool, 10_000)
    debit = {"wallet_id": wallet_id, "amount": "10.00", "currency": "EUR",
             "operation_key": f"order-{uuid.uuid4().hex[:10]}:pay"}
    async with pipeline(stage), mcp(gateway, gateway.tokens[gateway.payer]) as client:
        first = await client.call_tool("wallet.debit", debit)
        again = await client.call_tool("wallet.debit", debit)
        another = await client.call_tool("wallet.debit", {
            **debit, "operation_key": f"order-{uuid.uuid4().hex[:10]}:pay"})
    assert first.structured_content == again.structured_content, "the same call's result"
    assert first.structured_content["balance_minor"] == 9_000
    assert another.structured_content["balance_minor"] == 8_000, "a new key is a new intent"
    assert await debits(pool, wallet_id) == 2


async def test_a_denied_call_is_an_error_result_with_the_reason_code(gateway, stage, pool):
    async with pipeline(stage), mcp(gateway, gateway.tokens[gateway.payer]) as client:
        denied = await client.call_tool(
            "wallet.debit", {"wallet_id": "blocked-1", "amount": "10.00", "currency": "EUR"},
            meta=key_meta(f"blocked-{uuid.uuid4().hex[:10]}"))
        unkeyed = await client.call_tool(
            "wallet.debit", {"wallet_id": "w-1", "amount": "10.00", "currency": "EUR"})
    assert denied.is_error and denied.content[0].text.startswith("denied: denied_by_rule")
    assert denied.structured_content["reason_code"] == "denied_by_rule"
    assert unkeyed.is_error and unkeyed.structured_content["reason_code"] == \
        "operation_key_missing", "a caller-stated key is never made up from the request id"


async def test_a_call_awaiting_approval_is_pending_and_its_outcome_is_fetched_once_approved(
        gateway, stage, pool):
    wallet_id = await new_wallet(pool, 10_000)
    debit = {"wallet_id": wallet_id, "amount": "80.00", "currency": "EUR"}  # over the cap
    async with pipeline(stage):
        async with mcp(gateway, gateway.tokens[gateway.payer]) as client:
            pending = await client.call_tool("wallet.debit", debit,
                                             meta=key_meta(f"big-{uuid.uuid4().hex[:10]}"))
        assert pending.is_error and pending.structured_content["status"] == "awaiting_approval"
        assert pending.structured_content["approval"]["approvals_required"] == 1
        assert await debits(pool, wallet_id) == 0
        handle = pending.structured_content["handle"]
        intent = (await answer(pool, stage, handle["run_id"], handle["call_id"]))["payload"]
        await approve(stage, intent, "finance:a")
        async with mcp(gateway, gateway.tokens[gateway.payer]) as later:  # a new session
            settled = await later.call_tool("intentledger.outcome", {"handle": handle})
    assert not settled.is_error, settled.content[0].text
    assert settled.structured_content["balance_minor"] == 2_000
    assert await debits(pool, wallet_id) == 1


async def test_another_callers_copy_of_a_handle_is_refused_not_answered(gateway, stage, pool):
    """A handle (or a task id, which carries one) is not a secret: the gateway answers a
    caller only about the calls it proposed, though both callers are the same tenant's."""
    wallet_id = await new_wallet(pool, 10_000)
    debit = {"wallet_id": wallet_id, "amount": "80.00", "currency": "EUR"}  # over the cap
    async with pipeline(stage):
        async with mcp(gateway, gateway.tokens[gateway.payer]) as payer:
            pending = await payer.call_tool("wallet.debit", debit,
                                            meta=key_meta(f"big-{uuid.uuid4().hex[:10]}"))
        handle = pending.structured_content["handle"]
        async with mcp(gateway, gateway.tokens[gateway.stocker]) as someone_else:
            copied = await someone_else.call_tool("intentledger.outcome", {"handle": handle})
    assert copied.is_error and copied.structured_content["reason_code"] == "handle_invalid"
    assert "approval" not in copied.structured_content and "result" not in str(copied.content)


async def test_a_token_for_another_audience_or_none_is_refused_with_the_metadata_url(gateway):
    ping = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with httpx2.AsyncClient() as http:
        refused = {name: await http.post(gateway.url, json=ping, headers=headers) for name, headers in {
            "none": {},
            "other audience": {"Authorization": f"Bearer {gateway.jwt(gateway.payer, 'https://other.test/mcp')}"},
            "unlisted subject": {"Authorization": f"Bearer {gateway.jwt('nobody')}"},
            "static, guessed": {"Authorization": "Bearer " + secrets.token_urlsafe(24)}}.items()}
        metadata = (await http.get(gateway.url.replace(
            "/mcp", "/.well-known/oauth-protected-resource/mcp"))).json()
    assert {name: r.status_code for name, r in refused.items()} == dict.fromkeys(refused, 401)
    challenge = refused["other audience"].headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and "/.well-known/oauth-protected-resource/mcp" in challenge
    assert (metadata["resource"], metadata["authorization_servers"]) == (gateway.url, [ISSUER])


async def test_a_local_client_starts_the_gateway_on_stdio_and_calls_as_the_configured_caller(
        stage, pool):
    payer, stocker = fresh_principal(), fresh_principal()
    stage.write_policy(policy(payer, stocker))
    wallet_id = await new_wallet(pool, 10_000)
    process = StdioServerParameters(
        command=sys.executable, args=["-m", "intentledger.cli", "serve", "mcp-gateway"],
        cwd=str(ROOT), env={
            "INTENTLEDGER_KAFKA_BOOTSTRAP": stage.endpoints.kafka_bootstrap,
            "INTENTLEDGER_MCP_GATEWAY_STDIO_CALLER": f"{payer}@acme",
            "INTENTLEDGER_MCP_GATEWAY_TOOLS_FILE": str(stage.tools_file),
            "INTENTLEDGER_MCP_GATEWAY_POLICY_FILE": str(stage.policy_file),
            "INTENTLEDGER_MCP_GATEWAY_PRINCIPALS_FILE": str(local().principals_file),
            "INTENTLEDGER_MCP_GATEWAY_PROPOSALS_TOPIC": stage.proposals,
            "INTENTLEDGER_MCP_GATEWAY_RESULTS_FAMILY": stage.results,
            "INTENTLEDGER_SIGNING_KEY_FILE": str(local().key_file("mcp-gateway"))})
    async with pipeline(stage), Client(process) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        paid = await client.call_tool(
            "wallet.debit", {"wallet_id": wallet_id, "amount": "40.00", "currency": "EUR"},
            meta=key_meta(f"order-{uuid.uuid4().hex[:10]}:pay"), read_timeout_seconds=120)
    assert listed == {"wallet.debit", "intentledger.outcome"}
    assert not paid.is_error and paid.structured_content["balance_minor"] == 6_000
    assert await debits(pool, wallet_id) == 1
