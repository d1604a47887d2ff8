"""The downstream SDK: what a Python service needs to take effect requests from intentledger
safely (an idempotent write keyed by the operation key, fence checks, a status lookup)."""
