"""The envelope's JSON Schema, generated from the pydantic model so the two cannot diverge.

Consumers outside Python read ``schemas/envelope.schema.json``; ``tests/unit/test_schemas.py``
fails when the committed file no longer matches the model. Regenerate after changing the
model with ``python -m shared.messaging.schema_export``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from shared.messaging.envelope import Envelope

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
ENVELOPE_SCHEMA = SCHEMAS / "envelope.schema.json"


def envelope_schema() -> dict:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://intentledger.dev/schemas/envelope.schema.json",
        **Envelope.model_json_schema(),
    }


def render(schema: dict) -> str:
    """Sorted and indented so a model change shows up as a readable diff."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0]) if args else ENVELOPE_SCHEMA
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render(envelope_schema()), encoding="utf-8")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
