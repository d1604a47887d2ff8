"""A claimed outbox row becomes a Kafka record, or a reason to park it; never an exception
that would stall the other keys of its shard."""

from __future__ import annotations

import json

import pytest

from services.relay.records import KafkaRecord, Unpublishable, to_record
from shared.messaging.envelope import Envelope

LIMIT = 900_000


def claimed_row(**overrides) -> dict:
    """Shaped like a row of ``claims.claim_batch``, with the checks it computes in SQL."""
    envelope = Envelope.new(event_type="PingSent", run_id="run-1", producer="demo", payload={})
    row = {
        "position": 42,
        "topic": "demo.pings",
        "partition_key": "run-1",
        "envelope": envelope.model_dump_json(),
        "headers": json.dumps(envelope.headers()),
        "envelope_matches_row": True,
        "headers_are_object": True,
    }
    return row | overrides


def test_a_valid_row_becomes_a_record_keyed_by_its_partition_key():
    row = claimed_row()
    record = to_record(row, LIMIT)
    assert isinstance(record, KafkaRecord)
    assert record.position == 42
    assert record.topic == "demo.pings"
    assert record.key == b"run-1"
    assert record.value == row["envelope"].encode()
    assert record.headers == [(k, v.encode()) for k, v in json.loads(row["headers"]).items()]


@pytest.mark.parametrize("topic", [None, "", "demo pings", "demo/pings", "x" * 250, "démo"])
def test_a_row_with_an_invalid_topic_is_parked(topic):
    outcome = to_record(claimed_row(topic=topic), LIMIT)
    assert isinstance(outcome, Unpublishable)
    assert outcome.position == 42
    assert "invalid topic" in outcome.reason


def test_the_longest_legal_topic_name_is_accepted():
    assert isinstance(to_record(claimed_row(topic="t" * 249), LIMIT), KafkaRecord)


@pytest.mark.parametrize("matches", [False, None])
def test_a_row_whose_envelope_disagrees_with_the_row_is_parked(matches):
    outcome = to_record(claimed_row(envelope_matches_row=matches), LIMIT)
    assert isinstance(outcome, Unpublishable)
    assert "envelope" in outcome.reason


def test_a_row_whose_headers_are_not_an_object_is_parked():
    outcome = to_record(claimed_row(headers='["event_id"]', headers_are_object=False), LIMIT)
    assert isinstance(outcome, Unpublishable)
    assert "headers must be a JSON object" in outcome.reason


@pytest.mark.parametrize("value", [7, None, True, {"nested": "x"}, ["a"]])
def test_a_row_with_a_non_string_header_value_is_parked(value):
    headers = json.dumps({"event_id": "x", "retries": value})
    outcome = to_record(claimed_row(headers=headers), LIMIT)
    assert isinstance(outcome, Unpublishable)
    assert "header values must be strings" in outcome.reason


def test_a_row_larger_than_the_limit_is_parked_with_its_size():
    row = claimed_row()
    size = len(row["envelope"]) + len(row["headers"]) + len(row["partition_key"])
    assert isinstance(to_record(row, size), KafkaRecord)
    outcome = to_record(row, size - 1)
    assert isinstance(outcome, Unpublishable)
    assert f"oversized: {size} bytes" in outcome.reason


@pytest.mark.parametrize("topic", ["orders\n", ".", ".."])
def test_topic_names_kafka_refuses_are_parked_not_sent(topic):
    assert isinstance(to_record(claimed_row(topic=topic), LIMIT), Unpublishable)


def test_size_is_counted_in_bytes_not_characters():
    row = claimed_row()
    limit = len(row["envelope"].encode()) + len(row["headers"].encode()) + len("run-1")
    assert isinstance(to_record(row, limit), KafkaRecord)
    # PostgreSQL renders jsonb as UTF-8 text: "é" is one character but two bytes.
    widened = claimed_row(headers=json.dumps({**json.loads(row["headers"]), "note": "é"},
                                             ensure_ascii=False))
    same_characters = claimed_row(headers=json.dumps({**json.loads(row["headers"]), "note": "e"}))
    exact = len(same_characters["envelope"].encode()) + len(same_characters["headers"]) + len("run-1")
    assert isinstance(to_record(same_characters, exact), KafkaRecord)
    assert isinstance(to_record(widened, exact), Unpublishable)
