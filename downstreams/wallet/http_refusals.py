"""How the wallet's HTTP APIs (``http_api.py``, ``audit_api.py``) refuse a malformed request:
400 ``{"error": …}`` naming what to fix, a header by its HTTP name."""

from __future__ import annotations

import json
from collections.abc import Mapping

from aiohttp import web
from pydantic import ValidationError


def malformed(error: str) -> web.HTTPBadRequest:
    return web.HTTPBadRequest(text=json.dumps({"error": error}), content_type="application/json")


def explained(error: ValidationError, names: Mapping[str, str] | None = None) -> str:
    """Each problem at its place: a field by the header that carried it (``names``), else by
    its path in the body."""
    names = names or {}
    return "; ".join(f"{_place(e['loc'], names)}: {e['msg']}" for e in error.errors())


def _place(loc: tuple, names: Mapping[str, str]) -> str:
    path = ".".join(map(str, loc))
    return names.get(str(loc[0]), path) if loc else path
