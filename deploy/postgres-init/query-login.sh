#!/bin/sh
# The query API's login for the compose stack: not a superuser, not the owner of the read
# models, NOINHERIT, so row-level security binds it (services/query/login.py refuses anything
# else). The postgres image runs this once, when it initialises an empty data volume; for a
# volume made before, run the same statement by hand (docker compose exec postgres psql ...).
set -eu
psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d "$POSTGRES_DB" \
     -v password="${POSTGRES_QUERY_PASSWORD:-query}" <<'SQL'
CREATE ROLE query LOGIN NOINHERIT NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE
    PASSWORD :'password';
SQL
