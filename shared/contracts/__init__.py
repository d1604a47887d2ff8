"""Pydantic models of messages that cross service boundaries; the JSON Schemas in ``schemas/``
are generated from them."""
