-- The durable intents keep their one name: the table of intents is `intents`.
ALTER TABLE logical_calls RENAME TO intents;
