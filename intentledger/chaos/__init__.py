"""Fault protocols (issue 6): declared crash scenarios run against the real stack."""
