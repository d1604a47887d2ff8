"""The OpenAPI 3.1 document of the query API, generated from the endpoint table and the
pydantic models (OpenAPI 3.1 schemas are JSON Schema 2020-12, which pydantic writes)."""

from __future__ import annotations

import uuid
from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from services.query.endpoints import ENDPOINTS, Endpoint
from services.query.models import ErrorBody, Health

REF = "#/components/schemas/{model}"
ERRORS = {"400": "Invalid parameter or cursor.", "401": "Missing or unknown API key.",
          "403": "The key may not read this.", "404": "Not found, or not visible to this key.",
          "500": "Unexpected failure."}
PATH_TYPES: dict[type, dict[str, str]] = {str: {"type": "string"},
                                         uuid.UUID: {"type": "string", "format": "uuid"}}


@cache
def document() -> dict[str, Any]:
    models = [endpoint.response for endpoint in ENDPOINTS] + [ErrorBody, Health]
    refs, schemas = models_json_schema([(model, "serialization") for model in models],
                                       ref_template=REF)
    paths: dict[str, Any] = {path: {"get": operation} for path, operation in (
        (e.path, _operation(e, refs[(e.response, "serialization")])) for e in ENDPOINTS)}
    paths["/openapi.json"] = {"get": _public("getOpenApi", "This document.", {"type": "object"})}
    paths["/healthz"] = {"get": _public("getHealth", "200 when PostgreSQL answers, else 503.",
                                        refs[(Health, "serialization")])}
    return {
        "openapi": "3.1.0",
        "info": {"title": "intentledger query API", "version": "1",
                 "description": "Runs, calls, timelines, the UNKNOWN queue, manual review, "
                                "compensations and dead letters; tenant-isolated by row-level "
                                "security in PostgreSQL."},
        "paths": paths,
        "components": {"schemas": schemas["$defs"],
                       "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer",
                                                      "description": "An INTENTLEDGER_QUERY_API_KEYS key."}}},
        "security": [{"apiKey": []}],
    }


def _operation(endpoint: Endpoint, response: dict[str, Any]) -> dict[str, Any]:
    parameters = [{"name": name, "in": "path", "required": True,
                   "schema": PATH_TYPES[kind]}
                  for name, kind in endpoint.path_parameters.items()]
    if endpoint.filters is not None:
        parameters += _query_parameters(endpoint.filters)
    errors = {status: _json(description, {"$ref": REF.format(model="ErrorBody")})
              for status, description in ERRORS.items()
              if status != "403" or endpoint.operator_only}
    return {"operationId": endpoint.operation_id, "summary": endpoint.summary,
            "parameters": parameters, "responses": {"200": _json("OK", response), **errors}}


def _query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    schema = model.model_json_schema()
    parameters = []
    for name, field in schema["properties"].items():
        field = {key: value for key, value in field.items() if key != "title"}
        parameter = {"name": name, "in": "query", "required": name in schema.get("required", []),
                     "description": field.pop("description", ""), "schema": field}
        if field.get("type") == "array":
            parameter |= {"style": "form", "explode": True}
        parameters.append(parameter)
    return parameters


def _public(operation_id: str, summary: str, response: dict[str, Any]) -> dict[str, Any]:
    return {"operationId": operation_id, "summary": summary, "security": [], "parameters": [],
            "responses": {"200": _json("OK", response)}}


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}
