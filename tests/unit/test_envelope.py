"""The envelope's identity rules: one UUIDv7 per event, the same in headers and value."""

from __future__ import annotations

import json
import uuid

import pytest
from intentledger_client.contracts import ENVELOPE_CONTENT_TYPE

from shared.errors import PermanentError
from shared.messaging.envelope import Envelope, decode


def ping(**overrides) -> Envelope:
    fields = dict(event_type="PingSent", run_id="run-1", producer="demo", payload={"n": 1})
    return Envelope.new(**(fields | overrides))


def record_of(envelope: Envelope) -> tuple[bytes, list[tuple[str, bytes]]]:
    return envelope.value(), [(k, v.encode()) for k, v in envelope.headers().items()]


def test_new_mints_a_uuidv7_event_id():
    assert ping().event_id.version == 7


def test_event_ids_increase_in_minting_order():
    ids = [ping().event_id for _ in range(200)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_a_first_event_is_its_own_run_correlation_and_has_no_cause():
    envelope = ping(run_id="run-7")
    assert envelope.correlation_id == "run-7"
    assert envelope.causation_id is None


def test_a_caused_event_inherits_correlation_and_trace_and_names_its_cause():
    cause = ping(traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    effect = Envelope.new(event_type="PingReceived", run_id="run-1", producer="other",
                          payload={}, causation=cause)
    assert effect.causation_id == cause.event_id
    assert effect.correlation_id == cause.correlation_id
    assert effect.traceparent == cause.traceparent
    assert effect.event_id != cause.event_id


def test_headers_mirror_the_fields_and_declare_the_content_type():
    envelope = ping(traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    headers = envelope.headers()
    assert headers == {
        "event_id": str(envelope.event_id),
        "event_type": "PingSent",
        "schema_version": "1",
        "run_id": "run-1",
        "producer": "demo",
        "correlation_id": "run-1",
        "traceparent": envelope.traceparent,
        "content-type": ENVELOPE_CONTENT_TYPE,
    }


def test_headers_leave_out_fields_that_are_unset():
    assert "causation_id" not in ping().headers()


def test_decode_returns_the_envelope_that_was_encoded():
    envelope = ping(payload={"amount": "40.00", "currency": "EUR"})
    assert decode(*record_of(envelope)) == envelope


def test_decode_accepts_a_value_without_headers():
    envelope = ping()
    assert decode(envelope.value(), None) == envelope


@pytest.mark.parametrize("value", [None, b""])
def test_decode_refuses_an_empty_value(value):
    with pytest.raises(PermanentError):
        decode(value, [])


@pytest.mark.parametrize("value", [b"{not json", b"\xff\xfe", b"[]", b"null"])
def test_decode_refuses_a_value_that_is_not_a_json_object(value):
    with pytest.raises(PermanentError):
        decode(value, [])


def test_decode_refuses_a_value_missing_a_required_field():
    body = json.loads(ping().value())
    del body["event_id"]
    with pytest.raises(PermanentError):
        decode(json.dumps(body).encode(), [])


def test_decode_refuses_a_value_with_an_undeclared_field():
    body = json.loads(ping().value()) | {"priority": "high"}
    with pytest.raises(PermanentError):
        decode(json.dumps(body).encode(), [])


@pytest.mark.parametrize("name", ["event_id", "event_type", "run_id", "producer", "schema_version"])
def test_decode_refuses_headers_that_disagree_with_the_value(name):
    value, headers = record_of(ping())
    other = str(uuid.uuid4()) if name == "event_id" else "something-else"
    tampered = [(k, other.encode() if k == name else v) for k, v in headers]
    with pytest.raises(PermanentError, match=name):
        decode(value, tampered)


def test_a_caused_event_falls_back_to_the_causes_run_as_correlation():
    cause = ping().model_copy(update={"correlation_id": None})
    effect = Envelope.new(event_type="PingReceived", run_id="other-run", producer="t",
                          payload={}, causation=cause)
    assert effect.correlation_id == cause.run_id
