"""Read side for operators and agents: the query API, its tenant isolation and the operator CLI."""
