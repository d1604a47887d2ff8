-- Who proposed the intent a tombstone stands for (services/proposal_intake/expiry.py): a
-- proposal under an expired key is told the intent's id only if it is that principal's
-- (services/proposal_intake/outcomes.py, Outcomes.taken). Tombstones written before this
-- column existed name no principal, and so name their intent to no one.
ALTER TABLE expired_keys ADD COLUMN principal_id text;
