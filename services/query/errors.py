"""Failures the query API answers with a machine-readable code (``models.ErrorDetail``)."""

from __future__ import annotations


class QueryError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def not_found(what: str) -> QueryError:
    return QueryError(404, "not_found", f"{what} not found (or not visible to this key)")


def tenant_required() -> QueryError:
    return QueryError(400, "tenant_required", "an operator names a run by tenant and run id: "
                      "add `?tenant=<tenant id>` (run ids are per tenant)")


def invalid_cursor() -> QueryError:
    return QueryError(400, "invalid_cursor", "`after` is not a cursor from this listing")
