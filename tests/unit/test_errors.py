"""``is_retryable`` decides between backing off and parking: a wrong answer either spins on
poison forever or parks a good row because a broker blinked."""

from __future__ import annotations

import asyncpg
import pytest
from aiokafka import errors as kafka_errors

from shared.errors import PermanentError, RetryableError, is_retryable


@pytest.mark.parametrize("error", [
    asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed mid-operation"),
    asyncpg.exceptions.ConnectionFailureError("connection failure"),
    asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command"),
    asyncpg.exceptions.CrashShutdownError("terminating connection because of crash of another "
                                          "server process"),
    asyncpg.exceptions.InternalClientError("cannot switch to state 15; another operation (2) is "
                                           "in progress"),  # PostgreSQL stopped mid-query
    asyncpg.exceptions.CannotConnectNowError("the database system is starting up"),
    asyncpg.exceptions.TooManyConnectionsError("too many clients"),
    asyncpg.exceptions.SerializationError("could not serialize access"),
    asyncpg.exceptions.DeadlockDetectedError("deadlock detected"),
    asyncpg.InterfaceError("connection is closed"),
    ConnectionRefusedError(111, "Connection refused"),
    OSError("Multiple exceptions: [Errno 111] Connect call failed ('127.0.0.1', 5432)"),
    TimeoutError(),
], ids=lambda error: type(error).__name__)
def test_a_database_or_network_outage_is_retryable(error):
    assert is_retryable(error)


@pytest.mark.parametrize("error", [
    kafka_errors.KafkaTimeoutError(),
    kafka_errors.NotLeaderForPartitionError(),
    kafka_errors.OutOfOrderSequenceNumber(),
    kafka_errors.KafkaConnectionError(),
    kafka_errors.RequestTimedOutError(),
], ids=lambda error: type(error).__name__)
def test_a_broker_or_producer_session_error_is_retryable(error):
    assert is_retryable(error)


@pytest.mark.parametrize("error", [
    kafka_errors.MessageSizeTooLargeError(),
    kafka_errors.RecordTooLargeError(),
    kafka_errors.InvalidTopicError(),
    kafka_errors.CorruptRecordException(),
], ids=lambda error: type(error).__name__)
def test_an_error_about_the_record_itself_is_not_retryable(error):
    assert not is_retryable(error)


def test_our_own_classifications_are_taken_at_their_word():
    assert is_retryable(RetryableError("kafka unavailable"))
    assert not is_retryable(PermanentError("bad envelope"))


def test_a_constraint_violation_is_not_retryable():
    assert not is_retryable(asyncpg.exceptions.UniqueViolationError("duplicate key"))


def test_an_unclassified_error_is_not_retryable():
    assert not is_retryable(ValueError("bad input"))
    assert not is_retryable(KeyError("payload"))


@pytest.mark.parametrize("error", [PermissionError(13, "Permission denied"),
                                   FileNotFoundError(2, "No such file")],
                         ids=lambda error: type(error).__name__)
def test_a_local_file_error_is_not_retryable_although_it_is_an_oserror(error):
    assert not is_retryable(error)
