"""The settled-call audit: the ledger's settled calls checked against what the downstream holds
(``drift.py``), through the downstream's audit API (``client.py``); what it finds is recorded for
operators and counted (``findings.py``), never repaired."""
