"""The registry file is checked whole at start-up; every broken promise stops the service."""

from __future__ import annotations

import pytest

from shared.tools import RegistryError, Rejection, RejectionCode, load_registry

from .builders import EXAMPLE_FILE, entry, example, refusal, registry_of


def test_the_example_registry_declares_the_six_example_tools():
    names = {(tool.name, tool.version) for tool in example().tools}
    assert names == {("wallet.debit", "1"), ("wallet.refund", "1"), ("email.send", "1"),
                     ("inventory.reserve", "1"), ("inventory.release", "1"),
                     ("shipment.schedule", "1")}


def test_the_example_debit_is_compensated_by_the_refund_and_replay_safe_for_a_day():
    debit = example().get("wallet.debit", "1")
    assert debit.effect == "compensatable"
    assert (debit.compensating_tool.name, debit.compensating_tool.version) == ("wallet.refund", "1")
    assert debit.retry.replay_safe and debit.retry.key_retention_seconds == 24 * 3600
    assert (debit.reconciliation, debit.topic) == ("lookup_by_key", "effects.wallet")


def test_the_example_refund_is_built_from_the_debit_it_gives_back():
    assert example().get("wallet.debit", "1").compensation_arguments == {
        "wallet_id": "arguments.wallet_id", "debit_id": "result.debit_id",
        "amount": "arguments.amount", "currency": "arguments.currency"}


def test_the_example_reservation_is_released_by_the_id_its_result_must_carry():
    reserve = example().get("inventory.reserve", "1")
    assert reserve.effect == "compensatable"
    assert (reserve.compensating_tool.name, reserve.compensating_tool.version) == (
        "inventory.release", "1")
    assert reserve.compensation_arguments == {"reservation_id": "result.reservation_id"}
    assert "reservation_id" in reserve.result_schema["required"]
    release = example().get("inventory.release", "1")
    assert release.key.fields == ("reservation_id",) and release.reconciliation == "replay_same_key"


def test_the_example_warehouse_tools_share_the_warehouse_topic():
    assert {example().get(name, "1").topic for name in (
        "inventory.reserve", "inventory.release", "shipment.schedule")} == {"effects.warehouse"}


def test_the_example_email_is_irreversible_and_needs_approval():
    email = example().get("email.send", "1")
    assert (email.effect, email.requires_approval, email.key.scheme) == (
        "irreversible", True, "per_command")


def test_an_unknown_tool_is_rejected_as_unregistered_tool():
    with pytest.raises(Rejection) as caught:
        example().get("wallet.drain", "1")
    assert caught.value.code is RejectionCode.UNKNOWN_TOOL


def test_an_unknown_version_of_a_known_tool_is_rejected_and_names_the_versions_served():
    with pytest.raises(Rejection) as caught:
        example().get("wallet.debit", "2")
    assert caught.value.code is RejectionCode.UNKNOWN_TOOL_VERSION
    assert "runs 1" in caught.value.message


def test_two_versions_of_one_tool_are_looked_up_separately():
    registry = registry_of(entry(), entry(version="2", description="v2"))
    assert registry.get("ledger.post", "2").description == "v2"
    assert registry.get("ledger.post", "1").description == "Post a ledger line."


COMPENSATION = {"effect": "compensatable", "compensating_tool": {"name": "ledger.post", "version": "9"}}


@pytest.mark.parametrize(("entries", "says"), [
    ([entry(effect="compensatable")], "compensating_tool is required"),
    ([entry(**COMPENSATION)], "compensating tool ledger.post v9 is not declared"),
    ([entry(effect="compensatable", compensating_tool={"name": "ledger.post", "version": "1"})],
     "cannot compensate itself"),
    ([entry(compensating_tool={"name": "ledger.post", "version": "1"})],
     "compensating_tool is required for, and only for"),
    ([entry(effect="irreversible")], "must declare requires_approval: true"),
    ([entry(), entry()], "ledger.post v1 is declared twice"),
    ([entry(key={"scheme": "per_entity", "fields": ["nope"]})], "key field 'nope' must be a required"),
    ([entry(key={"scheme": "per_entity", "fields": ["note"]})], "key field 'note' must be a required"),
    ([entry(key={"scheme": "per_entity", "fields": []})], "at least 1 item"),
    ([entry(key={"scheme": "per_entity", "fields": ["lines[].price"]})], "not array items"),
    ([entry(key={"scheme": "per_command", "nonce_field": "ref"})], "key field 'ref' must be a required"),
    ([entry(key={"scheme": "per_hour"})], "does not match any of the expected tags"),
    ([entry(canonical=[{"path": "nowhere", "kind": "string"}])], "'nowhere' is not in arguments_schema"),
    ([entry(canonical=[{"path": "amount", "kind": "money", "currency_field": "ccy"}])],
     "currency field 'ccy' is not in arguments_schema"),
    ([entry(canonical=[{"path": "labels[]", "kind": "money"}])], "must end in the amount's field"),
    ([entry(canonical=[{"path": "note", "kind": "string"}, {"path": "note", "kind": "set"}])],
     "two canonical rules for path 'note'"),
    ([entry(canonical=[{"path": "note", "kind": "uppercase"}])], "does not match any of the expected tags"),
    ([entry(canonical=[{"path": "lines..price", "kind": "string"}])], "is not an argument path"),
    ([entry(retry={"max_attempts": 3, "attempt_timeout_seconds": 2, "replay_safe": True})],
     "replay_safe needs key_retention_seconds"),
    ([entry(retry={"max_attempts": 0, "attempt_timeout_seconds": 2, "replay_safe": False})],
     "retry.max_attempts"),
    ([entry(reconciliation="replay_same_key",
            retry={"max_attempts": 3, "attempt_timeout_seconds": 2, "replay_safe": False})],
     "replay_same_key needs retry.replay_safe: true"),
    ([entry(arguments_schema={"type": "object", "properties": {"a": {"type": "decimal"}}})],
     "not a valid JSON Schema"),
    ([entry(result_schema={"type": 7})], "result_schema: not a valid JSON Schema"),
    ([entry(arguments_schema={"type": "array"})], "must describe an object"),
    ([entry(version=1)], "tools[0] (ledger.post v1).version: Input should be a valid string"),
    ([entry(name="Wallet Debit")], "tools[0] (Wallet Debit v1).name"),
    ([entry(topic="effects/wallet")], ".topic"),
    ([entry(result_max_bytes=0)], ".result_max_bytes"),
    ([entry(effect="destructive")], ".effect"),
    ([entry(approval_required=True)], "approval_required: Extra inputs are not permitted"),
    ([], "(top level): the registry declares no tools"),
], ids=lambda value: value if isinstance(value, str) else None)
def test_a_registry_breaking_a_rule_is_refused_with_the_place_and_reason(entries, says):
    message = refusal({"tools": entries})
    assert message.startswith("test.yaml: ")
    assert says in message


def test_a_repeated_yaml_key_is_refused_instead_of_silently_keeping_the_last():
    assert "repeated key 'version'" in refusal('tools:\n  - name: a\n    version: "1"\n    version: "2"\n')


def test_a_file_that_is_not_yaml_is_refused():
    assert "not valid YAML" in refusal("tools: [unclosed")


def test_a_file_without_a_top_level_mapping_is_refused():
    assert "expected a mapping" in refusal("- just\n- a list\n")


def test_a_missing_file_is_refused_naming_the_path(tmp_path):
    with pytest.raises(RegistryError, match="absent.yaml: cannot read the tool registry"):
        load_registry(tmp_path / "absent.yaml")


def test_the_example_file_loads_from_its_path():
    assert load_registry(str(EXAMPLE_FILE)).get("inventory.reserve", "1").key.fields == (
        "sku", "order_id")
