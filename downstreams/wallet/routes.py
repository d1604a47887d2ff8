"""What the reference wallet consumes: the Kafka effect adapter's requests and lookups, and
the reader of each (``asked.py``); ``handlers.py`` answers what they read, a batch at a time."""

from __future__ import annotations

from downstreams.wallet.asked import effect_requested, lookup_requested
from shared.contracts.effect_requests import EFFECT_LOOKUP_REQUESTED, EFFECT_REQUESTED
from shared.messaging.routes import Routes
from shared.topology import EFFECTS_WALLET

ROUTES: Routes = {
    EFFECTS_WALLET: {EFFECT_REQUESTED: effect_requested,
                     EFFECT_LOOKUP_REQUESTED: lookup_requested},
}
