"""Fault protocols: declared crash scenarios run against the real stack."""
