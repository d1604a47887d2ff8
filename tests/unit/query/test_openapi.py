"""The OpenAPI document and the router come from one endpoint table; this checks they agree,
that the document is valid OpenAPI 3.1 JSON Schema, and that every parameter a handler reads
is documented."""

from jsonschema import Draft202012Validator

from services.query.endpoints import ENDPOINTS
from services.query.http_api import create_app
from services.query.openapi import document
from services.query.settings import QuerySettings


def routes() -> set[tuple[str, str]]:
    app = create_app(pool=None, settings=QuerySettings())  # routing only: nothing connects
    return {(route.method, route.resource.canonical) for route in app.router.routes()}


def test_every_route_is_documented_and_every_documented_path_is_routed():
    documented = {(method.upper(), path) for path, item in document()["paths"].items()
                  for method in item}
    assert documented == routes()


def test_each_endpoint_documents_its_query_and_path_parameters():
    paths = document()["paths"]
    for endpoint in ENDPOINTS:
        parameters = paths[endpoint.path]["get"]["parameters"]
        query = {p["name"] for p in parameters if p["in"] == "query"}
        path = {p["name"] for p in parameters if p["in"] == "path"}
        assert query == set(endpoint.filters.model_fields if endpoint.filters else ())
        assert path == set(endpoint.path_parameters)


def test_every_schema_is_valid_json_schema_and_every_reference_resolves():
    spec = document()
    assert spec["openapi"] == "3.1.0"
    schemas = spec["components"]["schemas"]
    for schema in schemas.values():
        Draft202012Validator.check_schema(schema)
    refs = set(references(spec))
    assert refs and all(ref.removeprefix("#/components/schemas/") in schemas for ref in refs)


def references(node):
    if isinstance(node, dict):
        if "$ref" in node:
            yield node["$ref"]
        for value in node.values():
            yield from references(value)
    elif isinstance(node, list):
        for value in node:
            yield from references(value)


def test_operation_ids_are_unique_and_only_operator_endpoints_answer_403():
    operations = [item["get"] for item in document()["paths"].values()]
    assert len({op["operationId"] for op in operations}) == len(operations)
    assert [op["operationId"] for op in operations if "403" in op["responses"]] == [
        "getPipelineHealth", "listDeadLetters"]
