"""What the reference wallet consumes: the Kafka effect adapter's requests and lookups."""

from __future__ import annotations

from downstreams.wallet.handlers import WalletInbox
from shared.contracts.effect_requests import EFFECT_LOOKUP_REQUESTED, EFFECT_REQUESTED
from shared.messaging.routes import Routes
from shared.topology import EFFECTS_WALLET

ROUTES: Routes = {
    EFFECTS_WALLET: {EFFECT_REQUESTED: WalletInbox.effect_requested,
                     EFFECT_LOOKUP_REQUESTED: WalletInbox.lookup_requested},
}
