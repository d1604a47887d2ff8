"""The published schemas are the models' own: a model change without a regenerated schema, or
an example that no longer validates, fails here rather than in another team's consumer."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from shared.messaging.envelope import Envelope
from shared.messaging.schema_export import ENVELOPE_SCHEMA, envelope_schema, render

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    schema = json.loads(ENVELOPE_SCHEMA.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


@pytest.fixture
def example() -> dict:
    return json.loads((SCHEMAS / "examples" / "envelope.json").read_text(encoding="utf-8"))


def test_the_committed_envelope_schema_matches_the_model():
    committed = ENVELOPE_SCHEMA.read_text(encoding="utf-8")
    assert committed == render(envelope_schema()), (
        "schemas/envelope.schema.json is stale: run python -m shared.messaging.schema_export")


def test_the_envelope_schema_declares_its_dialect_and_identity():
    schema = envelope_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "https://intentledger.dev/schemas/envelope.schema.json"


def test_the_example_envelope_validates(validator, example):
    validator.validate(example)


def test_the_example_envelope_is_also_accepted_by_the_model(example):
    assert Envelope.model_validate(example).event_id.version == 7


def test_an_envelope_without_an_event_id_is_invalid(validator, example):
    broken = copy.deepcopy(example)
    del broken["event_id"]
    errors = list(validator.iter_errors(broken))
    assert [error.validator for error in errors] == ["required"]
    assert "event_id" in errors[0].message


@pytest.mark.parametrize("field, value", [
    ("event_id", "not-a-uuid"),
    ("schema_version", 0),
    ("event_type", ""),
    ("payload", "a string"),
])
def test_an_envelope_with_a_malformed_field_is_invalid(validator, example, field, value):
    assert not validator.is_valid(example | {field: value})


def test_an_envelope_with_an_unknown_field_is_invalid(validator, example):
    assert not validator.is_valid(example | {"priority": "high"})
