"""Operation keys name one business intent per the tool's key scheme, inside one tenant."""

from __future__ import annotations

import re

import pytest

from shared.tools import CanonicalArguments, Rejection, RejectionCode, canonicalize, operation_key

from .builders import entry, example, registry_of

DEBIT = example().get("wallet.debit", "1")
EMAIL = example().get("email.send", "1")
RESERVE = example().get("inventory.reserve", "1")
DEBIT_ARGS = {"wallet_id": "w-1", "amount": "5.00", "currency": "EUR"}
EMAIL_ARGS = {"message_id": "msg-00000001", "to": ["a@example.com"], "subject": "Hi", "body": "."}
RESERVE_ARGS = {"sku": "SKU-1", "order_id": "o-1", "quantity": 2}
RUN_ONCE = registry_of(entry(key={"scheme": "once_per_run"})).get("ledger.post", "1")
RUN_ARGS = {"account": "a", "amount": 1, "currency": "EUR"}


def key(tool, arguments, tenant="acme", run_id="run-1", caller_key=None):
    return operation_key(tool, tenant, run_id, canonicalize(tool, tenant, arguments), caller_key)


def rejected(tool, arguments, **kwargs) -> RejectionCode:
    with pytest.raises(Rejection) as caught:
        key(tool, arguments, **kwargs)
    return caught.value.code


def test_a_caller_stated_key_names_the_intent_whatever_the_run():
    assert key(DEBIT, DEBIT_ARGS, run_id="r1", caller_key="k") == key(
        DEBIT, DEBIT_ARGS, run_id="r2", caller_key="k")
    assert key(DEBIT, DEBIT_ARGS, caller_key="k") != key(DEBIT, DEBIT_ARGS, caller_key="k2")


def test_a_caller_stated_key_is_independent_of_the_arguments_which_the_hash_binds_instead():
    changed = DEBIT_ARGS | {"amount": "6.00"}
    assert key(DEBIT, DEBIT_ARGS, caller_key="k") == key(DEBIT, changed, caller_key="k")


def test_one_caller_key_on_two_tools_names_two_intents():
    refund = example().get("wallet.refund", "1")
    refund_key = operation_key(refund, "acme", "run-1", canonicalize(
        refund, "acme", DEBIT_ARGS | {"debit_id": "d-1"}), "order-42")
    assert refund_key != key(DEBIT, DEBIT_ARGS, caller_key="order-42")


def test_a_caller_stated_tool_without_the_callers_key_is_rejected():
    assert rejected(DEBIT, DEBIT_ARGS) is RejectionCode.OPERATION_KEY_MISSING


@pytest.mark.parametrize("caller_key", ["", "k" * 256, "line\nbreak", "tab\t", "\x00", 42])
def test_an_empty_overlong_or_unprintable_caller_key_is_rejected(caller_key):
    assert rejected(DEBIT, DEBIT_ARGS, caller_key=caller_key) is RejectionCode.OPERATION_KEY_INVALID


def test_per_entity_keys_follow_the_entity_not_the_spelling_or_the_other_arguments():
    same = key(RESERVE, RESERVE_ARGS)
    assert key(RESERVE, RESERVE_ARGS | {"order_id": "tenant/acme/o-1", "sku": " SKU-1 "}) == same
    assert key(RESERVE, RESERVE_ARGS | {"quantity": 3}) == same
    assert key(RESERVE, RESERVE_ARGS | {"order_id": "o-2"}) != same
    assert key(RESERVE, RESERVE_ARGS | {"sku": "SKU-2"}) != same


def test_per_command_keys_follow_the_nonce():
    assert key(EMAIL, EMAIL_ARGS | {"subject": "Hello"}) == key(EMAIL, EMAIL_ARGS)
    assert key(EMAIL, EMAIL_ARGS | {"message_id": "msg-00000002"}) != key(EMAIL, EMAIL_ARGS)


def test_a_derived_scheme_does_not_let_a_caller_key_split_the_intent():
    assert key(EMAIL, EMAIL_ARGS, caller_key="a") == key(EMAIL, EMAIL_ARGS, caller_key="b")


def test_a_derived_key_does_not_trust_canonical_arguments_lacking_its_field():
    empty = CanonicalArguments(value={"message_id": ""}, bytes_=b"{}", hash="0" * 64)
    with pytest.raises(Rejection) as caught:
        operation_key(EMAIL, "acme", "run-1", empty, None)
    assert caught.value.code is RejectionCode.OPERATION_KEY_MISSING
    with pytest.raises(Rejection) as caught:
        operation_key(RESERVE, "acme", "run-1", empty, None)
    assert caught.value.code is RejectionCode.OPERATION_KEY_MISSING


def test_once_per_run_keys_follow_the_run():
    assert key(RUN_ONCE, RUN_ARGS, run_id="r1") == key(RUN_ONCE, RUN_ARGS | {"amount": 2}, run_id="r1")
    assert key(RUN_ONCE, RUN_ARGS, run_id="r1") != key(RUN_ONCE, RUN_ARGS, run_id="r2")


def test_a_once_per_run_tool_without_a_run_id_is_rejected():
    assert rejected(RUN_ONCE, RUN_ARGS, run_id="") is RejectionCode.OPERATION_KEY_MISSING


def test_a_new_tool_version_meets_the_intent_of_the_old_one():
    registry = registry_of(entry(), entry(version="2"))
    v1, v2 = registry.get("ledger.post", "1"), registry.get("ledger.post", "2")
    assert key(v1, RUN_ARGS, caller_key="k") == key(v2, RUN_ARGS, caller_key="k")


def test_the_same_caller_key_in_two_tenants_names_two_intents():
    assert key(DEBIT, DEBIT_ARGS, tenant="acme", caller_key="k") != key(
        DEBIT, DEBIT_ARGS, tenant="globex", caller_key="k")


def test_a_key_is_printable_bounded_and_readable_by_tenant_and_scheme():
    for made in (key(DEBIT, DEBIT_ARGS, tenant="t" * 64, caller_key="k" * 255),
                 key(RESERVE, RESERVE_ARGS), key(EMAIL, EMAIL_ARGS), key(RUN_ONCE, RUN_ARGS)):
        assert len(made) <= 200 and made.isprintable() and made.isascii()
        assert re.fullmatch(r"[A-Za-z0-9._-]+:[a-z_]+:[0-9a-f]{64}", made)
    assert key(RESERVE, RESERVE_ARGS).startswith("acme:per_entity:")


def test_a_key_for_an_invalid_tenant_is_refused():
    canonical = canonicalize(DEBIT, "acme", DEBIT_ARGS)
    with pytest.raises(Rejection) as caught:
        operation_key(DEBIT, "acme:evil", "run-1", canonical, "k")
    assert caught.value.code is RejectionCode.TENANT_INVALID
