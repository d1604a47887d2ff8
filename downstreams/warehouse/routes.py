"""What the reference warehouse consumes: the Kafka effect adapter's requests and lookups, and
the reader of each; ``handlers.py`` answers what they read, a batch at a time."""

from __future__ import annotations

from shared.contracts.effect_requests import (EFFECT_LOOKUP_REQUESTED, EFFECT_REQUESTED,
                                              EffectLookupRequested, EffectRequested)
from shared.messaging.envelope import Envelope, parse
from shared.messaging.routes import Routes
from shared.topology import EFFECTS_WAREHOUSE


def effect_requested(envelope: Envelope) -> EffectRequested:
    return parse(envelope, EffectRequested)


def lookup_requested(envelope: Envelope) -> EffectLookupRequested:
    return parse(envelope, EffectLookupRequested)


ROUTES: Routes = {
    EFFECTS_WAREHOUSE: {EFFECT_REQUESTED: effect_requested,
                        EFFECT_LOOKUP_REQUESTED: lookup_requested},
}
