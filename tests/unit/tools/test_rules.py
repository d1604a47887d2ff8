"""Each domain rule maps every spelling of one value to one canonical value, or refuses it."""

from __future__ import annotations

import pytest

from shared.tools import Rejection, RejectionCode, canonicalize

from .builders import tool

RULES = tool(canonical=[
    {"path": "account", "kind": "tenant_resource"},
    {"path": "labels", "kind": "set"},
    {"path": "at", "kind": "timestamp"},
    {"path": "note", "kind": "string"},
    {"path": "lines[].tags", "kind": "set"},
    {"path": "lines[].tags[]", "kind": "string"},
])


def canonical(tenant="acme", **fields):
    arguments = {"account": "w-1", "amount": 1, "currency": "EUR"} | fields
    return canonicalize(RULES, tenant, arguments).value


def rejected(tenant="acme", **fields) -> Rejection:
    with pytest.raises(Rejection) as caught:
        canonical(tenant, **fields)
    return caught.value


def test_a_bare_resource_id_is_scoped_to_the_proposals_tenant():
    assert canonical(account="w-1")["account"] == "tenant/acme/w-1"


def test_an_id_already_scoped_to_the_same_tenant_is_the_same_resource():
    assert canonical(account="tenant/acme/w-1")["account"] == canonical(account="w-1")["account"]


def test_a_local_id_may_itself_contain_slashes():
    assert canonical(account="tenant/acme/ledger/7")["account"] == "tenant/acme/ledger/7"


def test_an_id_naming_another_tenant_is_refused_as_tenant_mismatch():
    assert rejected(account="tenant/globex/w-1").code is RejectionCode.TENANT_MISMATCH


@pytest.mark.parametrize("account", ["", "tenant/acme/", "tenant/acme", "w 1", "w-1\n", "w\x00"])
def test_an_empty_or_unprintable_resource_id_is_refused(account):
    assert rejected(account=account).code is RejectionCode.RESOURCE_ID_INVALID


@pytest.mark.parametrize("tenant", ["", "a/b", "a:b", "-acme", "acme corp", "x" * 65, None])
def test_a_tenant_id_that_could_forge_a_scope_is_refused(tenant):
    assert rejected(tenant=tenant).code is RejectionCode.TENANT_INVALID


def test_a_set_is_sorted_by_canonical_json_bytes_and_deduplicated():
    assert canonical(labels=["b", "a", "b", 3, {"k": 1}, 3.0])["labels"] == ["a", "b", 3, {"k": 1}]


def test_set_items_are_canonical_before_duplicates_are_removed():
    value = canonical(lines=[{"price": 1, "currency": "EUR", "tags": [" red", "re\u0301d", "red ", "réd"]}])
    assert value["lines"][0]["tags"] == ["red", "réd"]


def test_objects_in_a_set_are_equal_whatever_their_key_order():
    assert canonical(labels=[{"a": 1, "b": 2}, {"b": 2, "a": 1}])["labels"] == [{"a": 1, "b": 2}]


@pytest.mark.parametrize("spelling", [
    "2024-03-01T10:00:00Z", "2024-03-01T11:00:00+01:00", "2024-03-01T05:00:00-05:00",
    "2024-03-01T10:00:00.000000+00:00", "20240301T100000Z", "2024-03-01 10:00Z",
])
def test_every_spelling_of_one_instant_is_one_utc_timestamp(spelling):
    assert canonical(at=spelling)["at"] == "2024-03-01T10:00:00.000000Z"


def test_fractions_finer_than_a_microsecond_are_cut_to_microseconds():
    assert canonical(at="2024-03-01T10:00:00.1234567Z")["at"] == "2024-03-01T10:00:00.123456Z"


@pytest.mark.parametrize("at", ["2024-03-01T10:00:00", "2024-03-01"])
def test_a_timestamp_without_a_zone_is_refused_as_naive(at):
    assert rejected(at=at).code is RejectionCode.TIMESTAMP_NAIVE


@pytest.mark.parametrize("at", ["yesterday", "2024-13-01T00:00:00Z", "2024-03-01T10:00:60Z",
                                "0001-01-01T00:30:00+01:00", ""])
def test_a_timestamp_that_names_no_instant_is_refused(at):
    assert rejected(at=at).code is RejectionCode.TIMESTAMP_INVALID


def test_strings_are_nfc_normalised_and_stripped():
    assert canonical(note="  Cafe\u0301 \n")["note"] == "Café"


def test_a_rule_on_an_absent_optional_field_changes_nothing():
    assert "note" not in canonical()


@pytest.mark.parametrize(("rule", "value"), [
    ({"path": "labels", "kind": "set"}, "not a list"),
    ({"path": "labels", "kind": "string"}, ["a"]),
    ({"path": "labels", "kind": "tenant_resource"}, ["a"]),
    ({"path": "labels[]", "kind": "string"}, "not a list"),
    ({"path": "lines[].tags", "kind": "set"}, ["not an object"]),
])
def test_a_rule_meeting_a_value_of_the_wrong_kind_refuses_it(rule, value):
    loose = tool(canonical=[rule], arguments_schema={"type": "object", "properties": {
        "labels": {"items": {}}, "lines": {"items": {"properties": {"tags": {}}}}}})
    with pytest.raises(Rejection) as caught:
        canonicalize(loose, "acme", {"labels": value, "lines": value})
    assert caught.value.code is RejectionCode.ARGUMENTS_INVALID


def test_a_timestamp_rule_meeting_a_number_refuses_it_as_invalid():
    loose = tool(canonical=[{"path": "at", "kind": "timestamp"}],
                 arguments_schema={"type": "object", "properties": {"at": {}}})
    with pytest.raises(Rejection) as caught:
        canonicalize(loose, "acme", {"at": 1709287200})
    assert caught.value.code is RejectionCode.TIMESTAMP_INVALID
