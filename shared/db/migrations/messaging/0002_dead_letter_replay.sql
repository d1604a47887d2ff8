-- When an operator re-published a dead letter to its topic (`intentledger dlq replay`). A row
-- is never deleted: the record, its reason and its replay stay as evidence.
ALTER TABLE dead_letters ADD COLUMN IF NOT EXISTS replayed_at timestamptz;
