"""The published topic contracts are the code's: each schema is what the exporter generates now,
every example validates against its schema and is read by the models, the intake's real output
validates, the reason-code catalog lists exactly the enums' codes, and asyncapi.yaml points at
real topics and real files."""

from __future__ import annotations

import json
import uuid
import re
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urldefrag

import pytest
import yaml
from jsonschema import Draft202012Validator, FormatChecker

from shared.contracts.proposals import INBOUND_PROPOSAL
from services.proposal_intake.domain import intent_of, name_intent
from services.proposal_intake.formats import to_proposals
from services.proposal_intake.outcomes import Outcomes
from shared.contracts.effect_requests import (EffectLookupRequested,
                                              EffectReceipt, EffectRequested)
from shared.contracts.intake import ProposalOutcome, Intent
from shared import topology as topics
from shared.messaging.contract_schemas import EFFECT_REQUESTS
from shared.messaging.envelope import Envelope
from shared.topology import EFFECT_RECEIPTS
from shared.messaging.reason_catalog import SOURCES
from shared.messaging.schema_export import GENERATED, REASON_CODES, SCHEMAS, main, render
from shared.tools import Rejection, load_registry

EXAMPLES = SCHEMAS / "examples"
TOPICS = sorted(topic.name for topic in topics.TOPICS if topic.name.split(".")[0] in ("agent", "ledger"))
EFFECT_ADAPTER = {EFFECT_REQUESTS: "{toolTopic}", EFFECT_RECEIPTS: EFFECT_RECEIPTS}
"""The Kafka effect adapter's schemas, with their AsyncAPI channel address:
requests travel on each tool's own topic, receipts on the reply topic."""
CONTRACTS = sorted([*TOPICS, *EFFECT_ADAPTER])
EXAMPLE_FILES = sorted(path for topic in CONTRACTS for path in (EXAMPLES / topic).glob("*.json"))
DRAFT_2020_12 = "application/schema+json;version=draft-2020-12"
FORMATS = FormatChecker()
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", re.IGNORECASE)


@FORMATS.checks("date-time")
def _rfc3339(value) -> bool:
    """jsonschema checks date-time only with an optional package; an offset is required."""
    return not isinstance(value, str) or _RFC3339.fullmatch(value) is not None


def load(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def validator(topic: str) -> Draft202012Validator:
    return Draft202012Validator(load(SCHEMAS / f"{topic}.schema.json"), format_checker=FORMATS)


def example(topic: str, name: str) -> dict:
    return load(EXAMPLES / topic / f"{name}.json")


@pytest.mark.parametrize("name", GENERATED)
def test_every_committed_contract_file_is_what_the_exporter_generates(name):
    assert (SCHEMAS / name).read_text(encoding="utf-8") == render(GENERATED[name]()), (
        f"schemas/{name} is stale: run .venv/bin/python -m shared.messaging.schema_export")


def test_the_exporter_writes_every_file_the_same_way_twice(tmp_path, capsys):
    main([str(tmp_path / "a")])
    main([str(tmp_path / "b")])
    for name in GENERATED:
        first = (tmp_path / "a" / name).read_text(encoding="utf-8")
        assert first == (tmp_path / "b" / name).read_text(encoding="utf-8")
        assert first == (SCHEMAS / name).read_text(encoding="utf-8")
        assert first.endswith("}\n")


@pytest.mark.parametrize("name", [name for name in GENERATED if name != REASON_CODES])
def test_every_schema_is_a_valid_2020_12_schema_with_its_own_id(name):
    schema = load(SCHEMAS / name)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"https://intentledger.dev/schemas/{name}"


def test_every_topic_has_a_schema_and_examples():
    for topic in CONTRACTS:
        assert (SCHEMAS / f"{topic}.schema.json").is_file(), topic
        assert list((EXAMPLES / topic).glob("*.json")), f"no example for {topic}"


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_every_example_validates_against_its_topic_schema(path):
    validator(path.parent.name).validate(load(path))


@pytest.mark.parametrize("path", sorted((EXAMPLES / topics.AGENT_PROPOSALS).glob("*.json")),
                         ids=lambda path: path.name)
def test_every_proposal_example_is_read_by_the_intake(path):
    document = load(path)
    INBOUND_PROPOSAL.validate_python(document)
    assert to_proposals(document)


@pytest.mark.parametrize("topic, name, model", [
    (topics.AGENT_RESULTS, "accepted", ProposalOutcome),
    (topics.AGENT_RESULTS, "duplicate", ProposalOutcome),
    (topics.AGENT_RESULTS, "rejected", ProposalOutcome),
    (topics.LEDGER_INTAKE, "proposal-accepted", Intent),
    (EFFECT_REQUESTS, "effect-requested", EffectRequested),
    (EFFECT_REQUESTS, "effect-lookup-requested", EffectLookupRequested),
    (EFFECT_RECEIPTS, "applied", EffectReceipt),
    (EFFECT_RECEIPTS, "stale", EffectReceipt),
])
def test_every_event_example_is_read_by_the_models(topic, name, model):
    envelope = Envelope.model_validate(example(topic, name))
    assert envelope.event_id.version == 7
    model.model_validate(envelope.payload)


def test_the_accepted_example_carries_money_in_minor_units():
    arguments = example(topics.LEDGER_INTAKE, "proposal-accepted")["payload"]["canonical_arguments"]
    assert arguments == {"wallet_id": "tenant/acme/w-1", "amount": 4000, "currency": "EUR"}


class _Outbox:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def emit(self, topic: str, envelope: Envelope) -> None:
        self.events.append((topic, json.loads(envelope.value())))


def test_what_the_intake_emits_validates_on_both_topics():
    registry = load_registry(Path(__file__).resolve().parents[2] / "config" / "tools.example.yaml")
    debit = example(topics.AGENT_PROPOSALS, "generic") | {
        "tenant_id": "acme", "tool": "wallet.debit", "tool_version": "1", "operation_key": "order-7:debit",
        "arguments": {"wallet_id": "w-1", "amount": "40.00", "currency": "EUR"}}
    proposal, = to_proposals(debit)
    named = name_intent(proposal, registry)
    outbox = _Outbox()
    outcomes = Outcomes(outbox, uuid.uuid4())
    outcomes.accepted(proposal, intent_of(proposal, named, datetime(2026, 3, 14, 10, tzinfo=UTC), 5))
    outcomes.duplicate(proposal, named, {"logical_call_id": "019ceb9e-87f5-714a-b79d-9b46164be254",
                                         "state": "VALIDATED", "run_id": "run-of-the-original"})
    refused, = to_proposals(debit | {"arguments": {"wallet_id": "w-1", "amount": "4.005",
                                                   "currency": "EUR"}})
    with pytest.raises(Rejection) as rejection:
        name_intent(refused, registry)
    outcomes.rejected(refused, rejection.value.code, rejection.value.message)
    outcomes.rejected_message("acme", "run-1", (), "too_deep", "nesting deeper than 32",
                              recorded_under="acme")
    assert len(outbox.events) == 8
    assert {topic for topic, _ in outbox.events} == {"agent.results.acme", topics.LEDGER_INTAKE}
    for topic, event in outbox.events:
        validator(topics.AGENT_RESULTS if topics.results_topics().match(topic) else topic
                  ).validate(event)


@pytest.mark.parametrize("change", [
    lambda e: e["payload"].update(outcome="approved"),
    lambda e: e["payload"].update(outcome="duplicate"),
    lambda e: e.update(event_type="ProposalApproved"),
    lambda e: e["payload"].pop("call_id"),
    lambda e: e["payload"].update(logical_call_id="not-a-uuid"),
    lambda e: e.pop("event_id"),
], ids=["unknown outcome", "outcome against event type", "unknown event type",
        "no call id", "malformed intent id", "no event id"])
def test_a_malformed_result_is_invalid(change):
    event = example(topics.AGENT_RESULTS, "accepted")
    change(event)
    assert not validator(topics.AGENT_RESULTS).is_valid(event)


def test_ledger_intake_takes_an_intent_for_an_accepted_proposal_and_an_outcome_otherwise():
    check = validator(topics.LEDGER_INTAKE)
    intent = example(topics.LEDGER_INTAKE, "proposal-accepted")
    outcome = example(topics.AGENT_RESULTS, "rejected")
    assert not check.is_valid(intent | {"payload": outcome["payload"]})
    assert not check.is_valid(outcome | {"payload": intent["payload"]})
    assert check.is_valid(outcome)
    # Fields added within a major version must not break readers (schemas/README.md).
    assert check.is_valid(intent | {"payload": {**intent["payload"], "added_later": 1}})


def test_a_result_with_a_field_added_later_stays_valid():
    event = example(topics.AGENT_RESULTS, "accepted")
    event["payload"]["added_later"] = "fine"
    event["added_later"] = True
    assert validator(topics.AGENT_RESULTS).is_valid(event)


def _without(field):
    return lambda document: document.pop(field)


@pytest.mark.parametrize("name, change", [
    ("generic", _without("run_id")),
    ("anthropic", _without("run_id")),
    ("openai_chat", _without("tenant_id")),
    ("generic", lambda d: d.update(format="gemini")),
    ("generic", lambda d: d.update(operation_kye="refund:order-88213:1")),
    ("generic", lambda d: d.update(budget={"max_calls": 0})),
    ("generic", lambda d: d.update(deadline_at="soon")),
    ("openai_responses_item", lambda d: d["output"].pop("call_id")),
    ("anthropic", lambda d: d["message"]["content"][1].pop("id")),
    ("openai_chat", lambda d: d["message"]["tool_calls"][0]["function"].pop("arguments")),
])
def test_a_malformed_proposal_is_refused_by_the_schema_and_the_model_alike(name, change):
    document = example(topics.AGENT_PROPOSALS, name)
    change(document)
    assert not validator(topics.AGENT_PROPOSALS).is_valid(document)
    assert not _model_accepts(document)


def _model_accepts(document) -> bool:
    try:
        INBOUND_PROPOSAL.validate_python(document)
    except ValueError:
        return False
    return True


def test_provider_fields_we_do_not_know_are_allowed():
    document = example(topics.AGENT_PROPOSALS, "openai_chat")
    document["message"]["audio"] = None
    document["message"]["tool_calls"][0]["caller"] = {"type": "direct"}
    assert validator(topics.AGENT_PROPOSALS).is_valid(document)
    assert _model_accepts(document)


def test_the_reason_code_catalog_lists_exactly_the_enums_codes():
    catalog = load(SCHEMAS / REASON_CODES)["codes"]
    defined: dict[str, list[str]] = {}
    for enum, _ in SOURCES:
        for member in enum:
            defined.setdefault(member.value, []).append(f"{enum.__module__}.{enum.__qualname__}")
    assert set(catalog) == set(defined)
    for code, entry in catalog.items():
        assert entry["sources"] == defined[code], code
        assert entry["meaning"].strip() and "\n" not in entry["meaning"], code


@pytest.fixture(scope="module")
def asyncapi() -> dict:
    return yaml.safe_load((SCHEMAS / "asyncapi.yaml").read_text(encoding="utf-8"))


def test_the_asyncapi_document_is_version_3_and_its_channels_are_our_topics(asyncapi):
    assert asyncapi["asyncapi"] == "3.0.0"
    addresses = [channel["address"] for channel in asyncapi["channels"].values()]
    assert sorted(addresses) == sorted([*(topics.BY_NAME[name].address for name in TOPICS),
                                        *EFFECT_ADAPTER.values()])
    assert {op["action"] for op in asyncapi["operations"].values()} == {"send", "receive"}


def _refs(node):
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _resolve(document, pointer: str):
    """RFC 6901: KeyError or IndexError when the pointer names nothing."""
    node = document
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        node = node[int(token)] if isinstance(node, list) else node[token]
    return node


def test_every_asyncapi_reference_resolves(asyncapi):
    refs = list(_refs(asyncapi))
    assert refs
    for ref in refs:
        location, pointer = urldefrag(ref)
        target = asyncapi if not location else load(SCHEMAS / location)
        assert _resolve(target, pointer) is not None, ref


def test_every_asyncapi_payload_is_one_of_our_2020_12_schema_files(asyncapi):
    payloads = {name: message["payload"] for name, message in asyncapi["components"]["messages"].items()}
    for name, payload in payloads.items():
        assert payload["schemaFormat"] == DRAFT_2020_12, name
        assert (SCHEMAS / payload["schema"]["$ref"]).is_file(), name
    files = {Path(payload["schema"]["$ref"]).name for payload in payloads.values()}
    assert files == {f"{topic}.schema.json" for topic in CONTRACTS}


def test_the_asyncapi_headers_are_the_envelope_headers(asyncapi):
    full = example(topics.AGENT_RESULTS, "accepted") | {
        "causation_id": "019ceb9e-87f0-7000-8000-000000000000",
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    declared = asyncapi["components"]["schemas"]["EnvelopeHeaders"]["properties"]
    assert set(declared) == set(Envelope.model_validate(full).headers())


def test_an_approval_whose_decision_disagrees_with_its_event_type_is_invalid():
    granted = example(topics.LEDGER_APPROVALS, "approval-granted")
    assert validator(topics.LEDGER_APPROVALS).is_valid(granted)
    granted["payload"]["decision"] = "refused"
    assert not validator(topics.LEDGER_APPROVALS).is_valid(granted)


@pytest.mark.parametrize("field", ["fence", "attempt", "policy_version", "downstream_receipt_id",
                                   "worker_id", "principal_id"])
def test_an_effect_without_its_audit_trail_is_invalid(field):
    effect = example(topics.LEDGER_EFFECTS, "effect-committed")
    effect["payload"].pop(field)
    assert not validator(topics.LEDGER_EFFECTS).is_valid(effect)
