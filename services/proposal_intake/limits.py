"""Size and shape limits: the first validation step, on a record's raw bytes, before any model.

Nothing hostile may reach what comes after: pydantic, PostgreSQL (its text refuses NUL and
lone surrogates) and the RFC 8785 canonicalizer (it refuses integers beyond ±(2^53−1) and
non-finite numbers). Python's own limits are defused here too: integers are range-checked
from their digits, so the int-from-string digit limit is never reached, and nesting too deep
for the parser's recursion limit is reported as ``too_deep``.

Answer or dead-letter: a violation is answered with a ProposalRejected exactly when
``reply_address(violation.document)`` finds a run id. ``too_large`` (we refuse to parse it),
``not_utf8`` and ``not_json`` never carry a document, nor does ``too_deep`` beyond the
parser's recursion limit: those are dead-lettered with their code. Every other violation is
found in a parsed document and answered when its run id is readable.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import partial
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shared.contracts.proposals import ID_MAX_CHARS, ReasonCode
from shared.contracts.tenants import is_tenant_id

MAX_SAFE_INTEGER = 2**53 - 1
_SAFE_DIGITS = len(str(MAX_SAFE_INTEGER))
AMBIGUOUS = object()
"""Stands for the value of a duplicated key, so no reader picks one of the copies."""

Problem = tuple[ReasonCode, str]


class Limits(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    max_bytes: int = Field(default=256 * 1024, ge=1)
    max_depth: int = Field(default=32, ge=1, description="Nested arrays and objects.")
    max_string_chars: int = Field(default=64 * 1024, ge=1, description="Keys and values.")
    max_array_items: int = Field(default=1024, ge=1)
    max_calls: int = Field(default=64, ge=1, description=(
        "Tool calls one message may carry: all of them are recorded in one transaction (an "
        "intent and two outbox rows each), which must stay short."))


DEFAULT_LIMITS = Limits()
"""The limits when none are configured (a frozen model: safe to share as a default)."""


class LimitViolation(Exception):
    def __init__(self, code: ReasonCode, message: str, document: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.document = document


def check(raw: bytes, limits: Limits = DEFAULT_LIMITS) -> Any:
    """The parsed JSON of a record value, or LimitViolation."""
    if len(raw) > limits.max_bytes:
        raise LimitViolation(ReasonCode.TOO_LARGE, f"{len(raw)} bytes, limit {limits.max_bytes}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise LimitViolation(ReasonCode.NOT_UTF8, f"invalid UTF-8 at byte {error.start}") from None
    return parse_text(text, limits)


def parse_text(text: str, limits: Limits) -> Any:
    """Also for JSON that arrives as a string inside a document (OpenAI tool arguments)."""
    found: list[Problem] = []
    try:
        document = json.loads(text, object_pairs_hook=partial(_object, found),
                              parse_int=partial(_integer, found),
                              parse_float=partial(_float, found),
                              parse_constant=partial(_constant, found))
    except RecursionError:
        raise LimitViolation(ReasonCode.TOO_DEEP, "nesting beyond the parser's limit") from None
    except ValueError as error:
        raise LimitViolation(ReasonCode.NOT_JSON, str(error)[:200]) from None
    problem = found[0] if found else _first_oversize(document, limits)
    if problem:
        raise LimitViolation(*problem, document=document)
    return document


def _object(found: list[Problem], pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) < len(pairs):
        seen: set[str] = set()
        duplicates = [key for key, _ in pairs if key in seen or seen.add(key)]
        found.append((ReasonCode.DUPLICATE_KEY, f"duplicate key {_quote(duplicates[0])}"))
        obj.update(dict.fromkeys(duplicates, AMBIGUOUS))
    return obj


def _integer(found: list[Problem], digits: str) -> int:
    if len(digits.lstrip("-")) <= _SAFE_DIGITS and abs(value := int(digits)) <= MAX_SAFE_INTEGER:
        return value
    found.append((ReasonCode.INTEGER_OUT_OF_RANGE, f"integer {digits[:24]}… beyond ±(2^53−1)"))
    return 0


def _float(found: list[Problem], text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        found.append((ReasonCode.NUMBER_OUT_OF_RANGE, f"number {text[:24]} overflows a double"))
    return value


def _constant(found: list[Problem], name: str) -> float:
    found.append((ReasonCode.NOT_FINITE, f"{name} is not a JSON number"))
    return math.nan


def _first_oversize(document: Any, limits: Limits) -> Problem | None:
    """Depth-first without recursion: the walk must not have a depth limit of its own."""
    stack = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            problem = _string_problem(value, limits)
        elif isinstance(value, (dict, list)):
            problem = _container_problem(value, depth, limits)
            items = value.values() if isinstance(value, dict) else value
            stack.extend((item, depth + 1) for item in items)
        else:
            continue
        if problem:
            return problem
    return None


def _container_problem(value: dict[str, Any] | list[Any], depth: int,
                       limits: Limits) -> Problem | None:
    if depth > limits.max_depth:
        return ReasonCode.TOO_DEEP, f"nesting deeper than {limits.max_depth}"
    if isinstance(value, list):
        if len(value) > limits.max_array_items:
            return (ReasonCode.ARRAY_TOO_LONG,
                    f"array of {len(value)} items, limit {limits.max_array_items}")
        return None
    return next(filter(None, (_string_problem(key, limits) for key in value)), None)


def _string_problem(text: str, limits: Limits) -> Problem | None:
    if len(text) > limits.max_string_chars:
        return ReasonCode.STRING_TOO_LONG, f"string of {len(text)} chars, limit {limits.max_string_chars}"
    if "\x00" in text:
        return ReasonCode.INVALID_STRING, "string contains NUL (U+0000)"
    if not text.isascii() and not _encodable(text):
        return ReasonCode.INVALID_STRING, "string contains a lone UTF-16 surrogate"
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _quote(text: str) -> str:
    return json.dumps(text)[:80]


@dataclass(frozen=True)
class ReplyAddress:
    run_id: str
    call_ids: tuple[str, ...]
    tenant_id: str | None = None
    """The tenant the body claims, if it is a valid tenant id."""


def reply_address(document: Any) -> ReplyAddress | None:
    """Where to answer a refused document, best effort; None means dead-letter it.

    Reads only values a valid proposal would also accept as ids: a run id that fails the
    limits itself (NUL, surrogate, too long, duplicated) names no run we may answer to.
    """
    run_id = _get(document, "run_id")
    if not _usable_id(run_id):
        return None
    tenant_id = _get(document, "tenant_id")
    return ReplyAddress(run_id, tuple(dict.fromkeys(filter(_usable_id, _call_ids(document)))),
                        tenant_id if is_tenant_id(tenant_id) else None)


def _call_ids(document: dict[str, Any]) -> list[Any]:
    message = _get(document, "message")
    match _get(document, "format"):
        case "generic":
            return [document.get("call_id")]
        case "openai.chat":
            return [_get(call, "id") for call in _listed(_get(message, "tool_calls"))]
        case "openai.responses":
            return [_get(item, "call_id") for item in _listed(_get(document, "output"))]
        case "anthropic":
            return [_get(block, "id") for block in _listed(_get(message, "content"))
                    if _get(block, "type") == "tool_use"]
    return []


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _usable_id(value: Any) -> bool:
    return (isinstance(value, str) and 0 < len(value) <= ID_MAX_CHARS and "\x00" not in value
            and _encodable(value))
