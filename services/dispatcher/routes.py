"""What the dispatcher consumes, and which of its inbox's handlers applies each event.

Receipts, resolutions and cancellations are read in the dispatcher's priority lane (a consumer
group of its own, ``main.py``): they finish intents already sent or stop them, and must not
wait behind new authorizations.
"""

from __future__ import annotations

from services.dispatcher.handlers import DispatcherInbox
from shared.contracts.authorizations import (APPROVAL_REQUESTED, AUTHORIZATION_ALLOWED,
                                             AUTHORIZATION_DENIED)
from shared.contracts.cancellations import RUN_CANCELLATION_REQUESTED
from shared.contracts.effect_requests import EFFECT_RECEIPT_ISSUED
from shared.contracts.resolutions import RESOLUTION_REQUESTED
from shared.messaging.routes import IGNORED, Routes
from shared.topology import EFFECT_RECEIPTS, LEDGER_AUTHORIZATIONS, LEDGER_RESOLUTIONS

ROUTES: Routes = {
    LEDGER_AUTHORIZATIONS: {AUTHORIZATION_ALLOWED: DispatcherInbox.authorized,
                            AUTHORIZATION_DENIED: DispatcherInbox.denied,  # a compensation's
                            APPROVAL_REQUESTED: IGNORED},   # an allow or a denial follows
    EFFECT_RECEIPTS: {EFFECT_RECEIPT_ISSUED: DispatcherInbox.answered},
    LEDGER_RESOLUTIONS: {RESOLUTION_REQUESTED: DispatcherInbox.resolution_requested,
                         RUN_CANCELLATION_REQUESTED: DispatcherInbox.cancellation_requested},
}
PRIORITY = (EFFECT_RECEIPTS, LEDGER_RESOLUTIONS)
