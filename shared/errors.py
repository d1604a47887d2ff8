"""The one place that decides whether a failure is worth retrying.

Everything that retries (relay publishing, consumer batches, later the dispatcher) asks
``is_retryable`` instead of matching library exceptions itself, so a new library error is
classified once, here.
"""

from __future__ import annotations

import asyncio

import asyncpg
from aiokafka import errors as kafka_errors


class PermanentError(Exception):
    """Retrying cannot help: the input itself is wrong. Park or dead-letter it."""


class RetryableError(Exception):
    """A dependency is unavailable or busy; the same work may succeed later."""


_RETRYABLE_POSTGRES = (
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,  # includes "connection is closed" after pg_terminate_backend
    asyncpg.exceptions.SerializationError,
    asyncpg.exceptions.DeadlockDetectedError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,  # another backend crashed: the server restarts
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.LockNotAvailableError,
    asyncpg.exceptions.QueryCanceledError,
    asyncpg.exceptions.InternalClientError,
)
"""The server went away, is starting, stopping or busy, or a conflict a retry resolves.

``InternalClientError`` is here because of outages: when PostgreSQL ends busy sessions on
shutdown (57P01 from ``pg_ctl stop -m fast``), asyncpg's protocol may meet the server's goodbye
in the middle of its own state change and raise "cannot switch to state N; another operation
(2) is in progress" instead of a connection error (MagicStack/asyncpg#1069). The connection is
closed by then and the pool replaces it. Left unclassified it counted as permanent: the relay's
scanner re-raised it and the whole relay exited; the policy's sweep would have stopped the
policy service the same way."""

_LOCAL_FILE_ERRORS = (PermissionError, FileNotFoundError, FileExistsError, IsADirectoryError,
                      NotADirectoryError)

_RECORD_REJECTED_BY_KAFKA = (
    kafka_errors.MessageSizeTooLargeError,
    kafka_errors.RecordTooLargeError,
    kafka_errors.RecordListTooLargeError,
    kafka_errors.InvalidTopicError,
    kafka_errors.CorruptRecordException,
)
"""Errors about one record itself. Every other Kafka error concerns the broker, the network,
the producer's session or the deployment (ACLs): retrying, after a fix if need be, can help."""

PRODUCER_SESSION_ERRORS = (
    kafka_errors.OutOfOrderSequenceNumber,
    kafka_errors.UnknownProducerId,
    kafka_errors.InvalidProducerEpoch,
    kafka_errors.ProducerFenced,
    kafka_errors.ProducerClosed,
)
"""The idempotent producer's sequence state is broken (seen after a broker restart): the
records are fine, the producer must be replaced before they are sent again."""


def is_retryable(error: BaseException) -> bool:
    if isinstance(error, RetryableError):
        return True
    if isinstance(error, PermanentError):
        return False
    if isinstance(error, _RETRYABLE_POSTGRES):
        return True
    if isinstance(error, _LOCAL_FILE_ERRORS):
        return False
    if isinstance(error, (ConnectionError, TimeoutError, asyncio.TimeoutError, OSError)):
        return True  # asyncio reports refused connections as a bare OSError
    if isinstance(error, kafka_errors.KafkaError):
        return not isinstance(error, _RECORD_REJECTED_BY_KAFKA)
    return False
