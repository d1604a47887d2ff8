"""Authenticated identities: the principals file (who may act, for which tenants, in which
roles, with which public keys) and records signed by them (a detached JWS over a Kafka
record's value, in a header). See ``signatures.py`` for what a verified signature proves."""
