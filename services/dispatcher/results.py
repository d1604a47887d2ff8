"""Tool output is untrusted data (docs/design.md §5.9): size-limited, validated against the tool's
result schema, and reduced to the fields the schema declares before anything is promoted."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from shared.tools import Rejection, ToolSpec
from shared.tools.jcs import jcs


def parsed_result(tool: ToolSpec, result: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(the declared fields of a valid result, None) or (None, why it is not acceptable)."""
    if not isinstance(result, dict):
        return None, "the tool returned no result object"
    try:
        size = len(jcs(result))
    except Rejection as rejection:
        return None, f"the result has no canonical JSON form: {rejection.message}"
    if size > tool.result_max_bytes:
        return None, f"the result is {size} bytes, over the tool's {tool.result_max_bytes}"
    error = best_match(Draft202012Validator(tool.result_schema).iter_errors(result))
    if error is not None:
        return None, f"the result breaks the tool's result schema at {error.json_path}: {error.message}"
    declared = tool.result_schema.get("properties")
    if declared is None:
        return result, None
    return {name: value for name, value in result.items() if name in declared}, None
