"""The gateway's ledger clients, one per caller: closed once idle, the least recently used
first beyond the bound, never under a call using it (clients faked: what is opened and closed
is the subject here; tests/integration/test_mcp_gateway*.py run the real ones)."""

from __future__ import annotations

import asyncio

import pytest
from intentledger_client.signing import (APPROVAL, CANCELLATION, PROPOSAL, REGISTRY, RESOLUTION,
                                         WITHDRAWAL, typ)
from joserfc import jws
from joserfc.jwk import OKPKey

from services.mcp_gateway.callers import Caller
from services.mcp_gateway.clients import Clients, delegated

KEY = OKPKey.generate_key("Ed25519", {"kid": "gateway-key"})


class Fake:
    def __init__(self, caller: Caller) -> None:
        self.caller, self.closed = caller, False

    async def close(self) -> None:
        self.closed = True


@pytest.fixture
def opened(monkeypatch) -> list[Fake]:
    made: list[Fake] = []

    async def open_fake(self, caller):
        made.append(Fake(caller))
        return made[-1]
    monkeypatch.setattr(Clients, "_open", open_fake)
    return made


def clients(idle_s: float = 60, max_open: int = 10) -> Clients:
    return Clients("127.0.0.1:1", gateway_id="mcp-gateway", key=None, options={},
                   idle_s=idle_s, max_open=max_open)


ANA, BEN, CID = (Caller(f"agent-{n}", "acme") for n in ("ana", "ben", "cid"))


async def test_a_caller_reuses_its_client_until_it_is_idle_then_gets_a_new_one(opened):
    pool = clients(idle_s=0.05)
    async with pool.using(ANA) as first:
        pass
    async with pool.using(ANA) as again:
        assert again is first and not first.closed
    await asyncio.sleep(0.2)  # the sweeper closes it
    assert first.closed and pool.open == 0
    async with pool.using(ANA) as later:
        assert later is not first and not later.closed
    await pool.close()
    assert later.closed


async def test_a_client_in_use_is_never_closed_however_long_the_call(opened):
    pool = clients(idle_s=0.05, max_open=1)
    async with pool.using(ANA) as busy:
        async with pool.using(BEN):
            pass
        await asyncio.sleep(0.2)
        assert not busy.closed, "a call is using it"
    await pool.close()


async def test_beyond_the_bound_the_least_recently_used_idle_clients_close_first(opened):
    pool = clients(max_open=2)
    for caller in (ANA, BEN, ANA, CID):  # BEN is now the least recently used
        async with pool.using(caller):
            pass
    await asyncio.sleep(0.01)  # closing runs beside the calls
    assert [(fake.caller, fake.closed) for fake in opened] == [(ANA, False), (BEN, True),
                                                                (CID, False)]
    assert pool.open == 2
    await pool.close()
    assert all(fake.closed for fake in opened)


@pytest.mark.parametrize("use", [PROPOSAL, WITHDRAWAL])
def test_a_callers_client_signs_its_calls_and_withdrawals_as_the_gateway_for_the_caller(use):
    value = b'{"run_id": "r"}'
    client = delegated("127.0.0.1:1", Caller("desk-agent", "acme", "finance:a"),
                       gateway_id="mcp-gateway", key=KEY)
    signed = jws.extract_compact(client._signature(value, use).encode(), payload=value,
                                 registry=REGISTRY)
    assert jws.validate_compact(signed, KEY, registry=REGISTRY)
    claims = signed.protected
    assert (claims["typ"], claims["principal"], claims["agent"], claims["person"]) == (
        typ(use), "mcp-gateway", "desk-agent", "finance:a")


@pytest.mark.parametrize("use", [APPROVAL, RESOLUTION, CANCELLATION])
def test_a_callers_client_signs_nothing_else_in_the_callers_name(use):
    """Not that the gateway's key could approve (it has no such role), but it never tries."""
    client = delegated("127.0.0.1:1", Caller("desk-agent", "acme", "finance:a"),
                       gateway_id="mcp-gateway", key=KEY)
    with pytest.raises(ValueError, match=use):
        client._signature(b"{}", use)
