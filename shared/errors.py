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
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.LockNotAvailableError,
    asyncpg.exceptions.QueryCanceledError,
)

_PERMANENT_KAFKA = (
    kafka_errors.MessageSizeTooLargeError,
    kafka_errors.RecordListTooLargeError,
    kafka_errors.InvalidTopicError,
    kafka_errors.TopicAuthorizationFailedError,
    kafka_errors.UnsupportedVersionError,
    kafka_errors.CorruptRecordException,
)


def is_retryable(error: BaseException) -> bool:
    if isinstance(error, RetryableError):
        return True
    if isinstance(error, PermanentError):
        return False
    if isinstance(error, _RETRYABLE_POSTGRES):
        return True
    if isinstance(error, (ConnectionError, TimeoutError, asyncio.TimeoutError, OSError)):
        return True
    if isinstance(error, _PERMANENT_KAFKA):
        return False
    if isinstance(error, kafka_errors.KafkaError):
        return bool(getattr(error, "retriable", False)) or isinstance(
            error, (kafka_errors.KafkaConnectionError, kafka_errors.KafkaTimeoutError,
                    kafka_errors.NodeNotReadyError, kafka_errors.ProducerClosed)
        )
    return False
