-- Transactional outbox: a service's state change and the events it causes commit together.
-- Rows are published by the relay only. `shard` groups rows by partition key so that exactly one
-- relay worker at a time publishes a given key (per-key order); see services/relay.
CREATE TABLE outbox (
    position      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id      uuid NOT NULL UNIQUE,
    topic         text NOT NULL,
    partition_key text NOT NULL,
    shard         smallint NOT NULL GENERATED ALWAYS AS ((hashtext(partition_key) & 2147483647) % 32) STORED,
    headers       jsonb NOT NULL,
    envelope      jsonb NOT NULL,
    status        text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'published', 'parked')),
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    published_at  timestamptz,
    park_reason   text
);
CREATE INDEX outbox_pending ON outbox (shard, position) WHERE status = 'pending';
CREATE INDEX outbox_published_at ON outbox (published_at) WHERE status = 'published';

-- A wake-up hint for the relay; the table stays the source of truth (NOTIFY is not replayed).
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('intentledger_outbox', TG_TABLE_SCHEMA);
    RETURN NULL;
END $$;
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();

-- Inbox: one row per (consumer, event id) applied. Written in the same transaction as the effect,
-- so a redelivered or republished event finds its row and changes nothing.
CREATE TABLE inbox (
    consumer     text NOT NULL,
    event_id     uuid NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);

-- Records a consumer could not apply, with the reason. Committed before the offset moves on,
-- so a poison message never stops a consumer and is never lost.
CREATE TABLE dead_letters (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    consumer       text NOT NULL,
    topic          text NOT NULL,
    kafka_partition integer NOT NULL,
    kafka_offset   bigint NOT NULL,
    event_id       uuid,
    reason         text NOT NULL,
    headers        jsonb NOT NULL,
    value          bytea,
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (consumer, topic, kafka_partition, kafka_offset)
);
