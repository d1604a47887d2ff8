"""What every service process does around its work, in one place so that the eight composition
roots cannot differ: install telemetry, log the effective configuration (one line, no secrets),
serve the health endpoints for as long as the service runs."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pydantic_settings import BaseSettings

from shared import telemetry
from shared.config import Settings
from shared.effective_config import effective, masked_url
from shared.health import Health, HealthSettings, serving

log = logging.getLogger(__name__)


@asynccontextmanager
async def service_runtime(health: Health, settings: Settings, *own: BaseSettings,
                          database: bool = True) -> AsyncIterator[None]:
    """``own``: the service's settings classes, shown in the configuration line; ``database``:
    False for a process that has none (it needs only Kafka's endpoint)."""
    telemetry_settings, health_settings = telemetry.TelemetrySettings(), HealthSettings()
    telemetry.install(health.service, telemetry_settings)
    if database:  # what the service connects to, wherever it was found
        endpoints = settings.endpoints
        connects = {"INTENTLEDGER_KAFKA_BOOTSTRAP": endpoints.kafka_bootstrap,
                    "INTENTLEDGER_DATABASE_URL": masked_url(endpoints.database_url)}
    else:
        connects = {"INTENTLEDGER_KAFKA_BOOTSTRAP": settings.kafka_endpoint}
    shown = effective(settings, *own, health_settings, telemetry_settings) | connects
    log.info("%s configuration %s", health.service, json.dumps(shown, sort_keys=True))
    async with serving(health, health_settings):
        yield
