"""What the reference warehouse consumes: the Kafka effect adapter's requests and lookups."""

from __future__ import annotations

from downstreams.warehouse.handlers import WarehouseInbox
from shared.contracts.effect_requests import EFFECT_LOOKUP_REQUESTED, EFFECT_REQUESTED
from shared.messaging.routes import Routes
from shared.topology import EFFECTS_WAREHOUSE

ROUTES: Routes = {
    EFFECTS_WAREHOUSE: {EFFECT_REQUESTED: WarehouseInbox.effect_requested,
                        EFFECT_LOOKUP_REQUESTED: WarehouseInbox.lookup_requested},
}
