"""Local Kafka and PostgreSQL for development and tests, with or without Docker.

``up`` picks, per service: an existing one named by ``INTENTLEDGER_KAFKA_BOOTSTRAP`` /
``INTENTLEDGER_DATABASE_URL``, else Docker via testcontainers when a daemon answers, else
local processes (Kafka from Maven Central jars, PostgreSQL from Debian's package). All
functions block; call them from async code through ``asyncio.to_thread``. Problems a human
must fix raise ``InfraError`` with a one-line message.
"""

from shared.infra.errors import InfraError
from shared.infra.manager import attach, down, status, up
from shared.infra.outages import (pause_kafka, resume_kafka, start_kafka, start_postgres, stop_kafka,
                                  stop_postgres)

__all__ = ["InfraError", "attach", "down", "pause_kafka", "resume_kafka", "start_kafka", "start_postgres",
           "status", "stop_kafka", "stop_postgres", "up"]
