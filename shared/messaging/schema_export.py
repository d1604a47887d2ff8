"""The published contract files in ``schemas/``, generated from the pydantic models and enums so
the two cannot diverge.

Consumers outside Python read these files; ``tests/unit/test_schemas.py`` and
``tests/unit/test_contract_schemas.py`` fail when a committed file no longer matches what this
module generates. Regenerate after changing a model or a reason code with
``python -m shared.messaging.schema_export`` (optionally naming another output directory).
``schemas/asyncapi.yaml`` and the examples are written by hand and checked by those tests.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from shared.contracts.audit import EffectListing, EffectsByKey
from shared.contracts.fault_protocol import FaultProtocol
from shared.messaging.contract_schemas import (EFFECT_REQUESTS, ID_BASE, approvals_schema,
                                               authorizations_schema, compensations_schema,
                                               dispatch_schema, resolutions_schema,
                                               effect_receipts_schema,
                                               effect_requests_schema, effects_schema, identified,
                                               ledger_intake_schema, proposals_schema,
                                               results_schema)
from shared.messaging.envelope import Envelope
from intentledger_client.tools import CATALOG
from shared.topology import EFFECT_RECEIPTS
from shared.messaging.reason_catalog import reason_codes

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
ENVELOPE_SCHEMA = SCHEMAS / "envelope.schema.json"
REASON_CODES = "reason-codes.json"


def envelope_schema() -> dict:
    return identified("envelope.schema.json", Envelope.model_json_schema())


def reason_codes_document() -> dict:
    """A catalog, deliberately not a schema: new codes are additive, so readers must not refuse
    a code they do not know yet."""
    return {
        "$id": ID_BASE + REASON_CODES,
        "description": "Every stable reason_code of a ProposalRejected or an AuthorizationDenied "
                       "(or a dead-letter, or an approval that did not count), with the enums "
                       "that define it. Codes are never renamed, removed or reused.",
        "codes": reason_codes(),
    }


def fault_protocol_schema() -> dict:
    """Not a message: the file format of ``intentledger chaos run``, for editors and CI."""
    return identified("fault-protocol.schema.json", FaultProtocol.model_json_schema())


def tool_catalog_schema() -> dict:
    """Not a message: what ``intentledger tools export --format catalog`` prints, the tools a
    client exports provider definitions from."""
    return identified("tool-catalog.schema.json", CATALOG.json_schema())


def downstream_audit_schema() -> dict:
    """Not a message: the HTTP audit API a downstream serves (``shared/contracts/audit.py``),
    its question by key and its answer."""
    listing = EffectListing.model_json_schema()
    definitions = {**listing.pop("$defs"), "EffectListing": listing,
                   "EffectsByKey": EffectsByKey.model_json_schema()}
    return identified("downstream-audit.schema.json", {
        "description": "The audit API of a tool's audit_url: GET {audit_url}/effects?tool_name="
                       "&since=&until=[&after=][&limit=] and POST {audit_url}/effects/by-key "
                       "(an EffectsByKey) both answer an EffectListing.",
        "$defs": definitions})


GENERATED: dict[str, Callable[[], dict]] = {
    "envelope.schema.json": envelope_schema,
    "agent.proposals.schema.json": proposals_schema,
    "agent.results.schema.json": results_schema,
    "ledger.intake.schema.json": ledger_intake_schema,
    "ledger.approvals.schema.json": approvals_schema,
    "ledger.authorizations.schema.json": authorizations_schema,
    "ledger.compensations.schema.json": compensations_schema,
    "ledger.dispatch.schema.json": dispatch_schema,
    "ledger.resolutions.schema.json": resolutions_schema,
    "ledger.effects.schema.json": effects_schema,
    f"{EFFECT_REQUESTS}.schema.json": effect_requests_schema,
    f"{EFFECT_RECEIPTS}.schema.json": effect_receipts_schema,
    REASON_CODES: reason_codes_document,
    "fault-protocol.schema.json": fault_protocol_schema,
    "tool-catalog.schema.json": tool_catalog_schema,
    "downstream-audit.schema.json": downstream_audit_schema,
}


def render(schema: dict) -> str:
    """Sorted and indented so a model change shows up as a readable diff."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0]) if args else SCHEMAS
    target.mkdir(parents=True, exist_ok=True)
    for name, build in GENERATED.items():
        (target / name).write_text(render(build()), encoding="utf-8")
        print(f"wrote {target / name}")


if __name__ == "__main__":
    main()
