"""Properties of the argumentsHash and operation keys over generated proposals."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from shared.tools import TENANT_ID_PATTERN, canonicalize, operation_key
from shared.tools.currencies import EXPONENTS
from shared.tools.money import MAX_SAFE_INTEGER

from .builders import example, tool

DEBIT = example().get("wallet.debit", "1")
RESERVE = example().get("inventory.reserve", "1")
LOOSE = tool(canonical=[{"path": "account", "kind": "tenant_resource"},
                        {"path": "amount", "kind": "money", "minimum_minor": -MAX_SAFE_INTEGER},
                        {"path": "labels", "kind": "set"},
                        {"path": "at", "kind": "timestamp"},
                        {"path": "note", "kind": "string"}])

json_values = st.recursive(
    st.none() | st.booleans() | st.text(max_size=8)
    | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20)
tenants = st.from_regex(TENANT_ID_PATTERN, fullmatch=True)
currencies = st.sampled_from(sorted(EXPONENTS))
minor_units = st.integers(-(10**12), 10**12)


def reordered(value, rnd: random.Random):
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {key: reordered(item, rnd) for key, item in items}
    if isinstance(value, list):
        return [reordered(item, rnd) for item in value]
    return value


def respelled(value, rnd: random.Random):
    """The same JSON document, written with other key order and whitespace, read back."""
    text = json.dumps(reordered(value, rnd), indent=rnd.choice([None, 0, 2, "\t"]),
                      separators=rnd.choice([(",", ":"), (", ", ": "), (" ,\n", " :  ")]))
    return json.loads(text)


def spellings(minor: int, currency: str, padding: int) -> list:
    exponent = EXPONENTS[currency]
    text = format(Decimal(minor).scaleb(-exponent), "f")
    padded = text + ("" if "." in text or not padding else ".") + "0" * padding
    forms = [text, padded, float(text)]
    if minor % 10**exponent == 0:
        forms.append(minor // 10**exponent)
    return forms


@given(extra=json_values, labels=st.lists(json_values, max_size=5), rnd=st.randoms())
def test_the_hash_ignores_key_order_and_whitespace(extra, labels, rnd):
    arguments = {"account": "w-1", "amount": "2.50", "currency": "EUR", "extra": extra, "labels": labels}
    assert canonicalize(LOOSE, "acme", respelled(arguments, rnd)).hash == canonicalize(
        LOOSE, "acme", arguments).hash


@given(minor=minor_units, currency=currencies, padding=st.integers(0, 3))
def test_every_spelling_of_an_amount_has_one_hash_and_the_exact_minor_units(minor, currency, padding):
    results = [canonicalize(LOOSE, "acme", {"account": "w", "amount": amount, "currency": currency})
               for amount in spellings(minor, currency, padding)]
    assert len({result.hash for result in results}) == 1
    assert {result.value["amount"] for result in results} == {minor}


@given(first=st.tuples(minor_units, currencies), second=st.tuples(minor_units, currencies))
def test_different_amounts_or_currencies_never_share_a_hash(first, second):
    assume(first != second)
    hashes = {canonicalize(LOOSE, "acme", {"account": "w", "amount": spellings(minor, currency, 0)[0],
                                           "currency": currency}).hash
              for minor, currency in (first, second)}
    assert len(hashes) == 2


@given(labels=st.lists(st.text(max_size=5), max_size=6), rnd=st.randoms())
def test_a_set_hashes_alike_in_any_order_and_with_repeats(labels, rnd):
    shuffled = labels + labels[: rnd.randint(0, len(labels))]
    rnd.shuffle(shuffled)
    hashes = {canonicalize(LOOSE, "acme", {"account": "w", "amount": 1, "currency": "EUR",
                                           "labels": form}).hash for form in (labels, shuffled)}
    assert len(hashes) == 1


@given(moment=st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1),
                           timezones=st.just(UTC)),
       offset_minutes=st.integers(-14 * 60, 14 * 60))
def test_one_instant_in_any_zone_offset_is_one_canonical_timestamp(moment, offset_minutes):
    zone = timezone(timedelta(minutes=offset_minutes))
    values = {canonicalize(LOOSE, "acme", {"account": "w", "amount": 1, "currency": "EUR",
                                           "at": form.isoformat()}).value["at"]
              for form in (moment, moment.astimezone(zone))}
    assert values == {moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"}


@given(note=st.text(max_size=12))
def test_string_normalisation_is_idempotent(note):
    once = canonicalize(LOOSE, "acme", {"account": "w", "amount": 1, "currency": "EUR", "note": note})
    again = canonicalize(LOOSE, "acme", once.value | {"amount": 1})
    assert again.value["note"] == once.value["note"]


@settings(max_examples=200)
@given(tenant=tenants, other=tenants, caller_key=st.text(min_size=1, max_size=40).filter(str.isprintable))
def test_two_tenants_never_share_an_operation_key(tenant, other, caller_key):
    assume(tenant != other)
    args = {"wallet_id": "w-1", "amount": "1.00", "currency": "EUR"}
    reserve = {"sku": "S", "order_id": "o-1", "quantity": 1}
    for tool_, arguments, key in ((DEBIT, args, caller_key), (RESERVE, reserve, None)):
        keys = {operation_key(tool_, t, "run-1", canonicalize(tool_, t, arguments), key)
                for t in (tenant, other)}
        assert len(keys) == 2
        assert all(made.isprintable() and len(made) <= 200 for made in keys)


@given(tenant=tenants, keys=st.lists(st.text(min_size=1, max_size=40).filter(str.isprintable),
                                     min_size=2, max_size=2, unique=True))
def test_distinct_caller_keys_are_never_merged(tenant, keys):
    canonical = canonicalize(DEBIT, tenant, {"wallet_id": "w", "amount": 1, "currency": "EUR"})
    assert len({operation_key(DEBIT, tenant, "run-1", canonical, key) for key in keys}) == 2
