"""PostgreSQL access: pools, forward-only migrations and the unit of work."""
