"""The fault-protocol format: shipped files are valid against the model and the published JSON
Schema, and a protocol that refers to things it does not define is refused before it runs."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
from pydantic import ValidationError

from shared.contracts.fault_protocol import FaultProtocol, load, substitute
from tests.conftest import ROOT

SHIPPED = sorted((ROOT / "fault-protocols").glob("*.json"))
SCHEMA = json.loads((ROOT / "schemas" / "fault-protocol.schema.json").read_text())
MINIMAL = {
    "name": "minimal", "guards": "nothing", "seed": 1,
    "proposals": [{"name": "debit", "tool": "wallet.debit", "arguments": {"amount": "1.00"}}],
    "assertions": [{"fact": "business_effects", "call": "debit", "value": 1}],
}


GUARDED = {  # the issue's list, from the seed articles' "what could go wrong"
    "crash after the downstream commit, before the result record": "crash-after-downstream-commit",
    "intent logged after dispatch": "intent-durable-before-dispatch",
    "provider call id reused for a different intent": "provider-call-id-reused",
    "same key with changed arguments": "same-key-changed-arguments",
    "timeout marked failed": "timeout-is-unknown-not-failed",
    "several layers retrying": "several-layers-retrying",
    "relative timeouts resetting": "relative-timeouts-do-not-reset",
    "lease expired without fence": "lease-expired-stale-worker",
    "authorization expiring in the queue": "authorization-expires-in-queue",
    "parallel results correlated by position": "parallel-results-by-call-id",
    "compensation failing": "compensation-fails",
    "outbox duplicate delivered to a consumer": "outbox-duplicate-delivered",
    "tool output carrying instructions": "tool-output-carries-instructions",
    "a run with no budget": "run-without-budget",
    "relay crash between publish and mark": "relay-crash-between-publish-and-mark",
    "Kafka down 20 s": "kafka-down-20s",
    "PostgreSQL restarted under load": "postgres-restarted-under-load",
    "a poison message": "poison-message",
    "dispatch_count == 0 for refused proposals": "zero-dispatch-for-refused-proposals",
    "another tenant's run id used by a tenant": "another-tenants-run-id",
}


@pytest.mark.parametrize("failure, name", GUARDED.items(), ids=list(GUARDED))
def test_every_failure_of_the_list_has_a_shipped_scenario(failure, name):
    assert (ROOT / "fault-protocols" / f"{name}.json").is_file(), failure


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_protocols_are_valid(path):
    document = json.loads(path.read_text())
    jsonschema.Draft202012Validator(SCHEMA).validate(document)
    protocol = load(path)
    for relative in filter(None, (protocol.policy_file, protocol.tools_file)):
        assert (path.parent / relative).is_file(), relative


def test_shipped_protocols_have_distinct_names():
    """The name is the scenario's log folder and part of its run ids."""
    names = [load(path).name for path in SHIPPED]
    assert len(set(names)) == len(names)


def _with(**changes) -> dict:
    document = copy.deepcopy(MINIMAL)
    for key, value in changes.items():
        document[key] = value
    return document


@pytest.mark.parametrize("document, complaint", [
    (_with(assertions=[{"fact": "state", "call": "nobody", "value": "SUCCEEDED"}]), "undeclared call"),
    (_with(assertions=[{"fact": "state", "value": "SUCCEEDED"}]), "needs a call"),
    (_with(assertions=[{"fact": "run_status", "run": "other", "value": "completed"}]), "undeclared run"),
    (_with(assertions=[{"fact": "state", "call": "debit", "at": "crash", "value": "X"}]),
     "unknown fault"),
    (_with(faults=[{"kind": "inject", "id": "crash", "service": "wallet",
                    "point": "wallet.after_commit_drop_response", "action": "exit"}],
           assertions=[{"fact": "business_effects", "call": "debit", "at": "crash", "value": 0,
                        "eventually": True}]), "cannot be awaited"),
    (_with(proposals=MINIMAL["proposals"] * 2), "unique"),
    (_with(faults=[{"kind": "inject", "id": "d", "service": "wallet", "point": "wallet.delay",
                    "action": "delay"}]), "seconds is required"),
    (_with(faults=[{"kind": "pause", "id": "p", "service": "dispatcher", "for_s": 1,
                    "when": {"call": "debit"}}]), "needs a state or attempts"),
    (_with(faults=[{"kind": "pause", "id": "p", "service": "dispatcher", "for_s": 1,
                    "when": {"call": "ghost", "state": "DISPATCHING"}}]), "undeclared call"),
    (_with(faults=[{"kind": "flood", "id": "f"}]), "kind"),
    (_with(surprise=True), "surprise"),
    (_with(proposals=[MINIMAL["proposals"][0] | {"message": "turn-1"}]), "carries no messages"),
    (_with(proposals=[MINIMAL["proposals"][0], MINIMAL["proposals"][0] | {
        "name": "theirs", "tenant": "globex"}],
           assertions=[{"fact": "run_status", "run": "main", "value": "completed"}]), "say whose"),
    (_with(assertions=[{"fact": "run_status", "run": "main", "tenant": "globex",
                        "value": "completed"}]), "no proposal of tenant 'globex'"),
])
def test_a_protocol_that_does_not_add_up_is_refused(document, complaint):
    with pytest.raises(ValidationError, match=complaint):
        FaultProtocol.model_validate(document)


def test_the_published_schema_refuses_what_the_model_refuses():
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(SCHEMA).validate(_with(surprise=True))


def test_nonce_is_substituted_in_every_string_and_nothing_else():
    value = {"a": "w-${nonce}", "b": ["${nonce}:${nonce}", 3, None], "c": {"d": True}}
    assert substitute(value, "7-ab") == {"a": "w-7-ab", "b": ["7-ab:7-ab", 3, None],
                                         "c": {"d": True}}


def test_the_documented_worked_example_is_the_shipped_file():
    readme = (ROOT / "docs" / "fault-injection.md").read_text()
    start = readme.index("```json\n", readme.index("## Write a fault protocol")) + len("```json\n")
    example = json.loads(readme[start:readme.index("```", start)])
    assert example == json.loads((ROOT / "fault-protocols" / "your-own-tool-shipment.json").read_text())
