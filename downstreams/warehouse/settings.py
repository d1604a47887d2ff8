"""Warehouse configuration, from ``INTENTLEDGER_WAREHOUSE_*`` environment variables."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.topology import EFFECT_RECEIPTS, EFFECTS_WAREHOUSE


class WarehouseSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTENTLEDGER_WAREHOUSE_", extra="ignore")

    request_topic: str = EFFECTS_WAREHOUSE
    """The tool registry's ``topic`` for inventory.reserve, inventory.release, shipment.schedule."""
    reply_topic: str = EFFECT_RECEIPTS
    """Created at start; each request names the topic its receipt goes to."""
    batch_size: int = Field(default=200, ge=1)
    faults: str = ""
    """Extra ``shared.faults`` rules for this process, e.g.
    ``warehouse.refuse_shipment=drop`` (added to ``INTENTLEDGER_FAULTS``)."""
