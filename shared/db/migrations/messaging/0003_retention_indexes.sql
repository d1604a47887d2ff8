-- The purge of old inbox rows and dead letters (shared/messaging/retention.py) looks them up by
-- age. BRIN indexes: rows arrive in time order, so a block range summarizes them well, and
-- keeping the index costs next to nothing on the inbox's hot insert path. Dead letters are no
-- longer kept for ever: they go after INTENTLEDGER_RETENTION_DEAD_LETTERS_S (30 days).
CREATE INDEX IF NOT EXISTS inbox_processed_at ON inbox USING brin (processed_at);
CREATE INDEX IF NOT EXISTS dead_letters_created_at ON dead_letters USING brin (created_at);
