-- The person a gateway proposed an intent for (the signature's `person` claim; docs/mcp.md),
-- kept with the intent and its tombstone: a proposal under the key is answered about the
-- intent only for the same principal and the same person (services/proposal_intake/outcomes.py,
-- Outcomes.taken). `person_recorded` tells "proposed for no person" (NULL, recorded) from a row
-- written before this migration, whose person is not known: such a row is answered by its
-- principal alone, as it was when it was written.
ALTER TABLE logical_calls ADD COLUMN person_id text,
    ADD COLUMN person_recorded boolean NOT NULL DEFAULT false;
ALTER TABLE expired_keys ADD COLUMN person_id text,
    ADD COLUMN person_recorded boolean NOT NULL DEFAULT false;
