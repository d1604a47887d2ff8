-- Operators' manual repairs, as received (the event id is the key: a redelivery is one row),
-- and what became of each: applied by a step under the run's lease, or refused with a reason.
CREATE TABLE resolutions (
    event_id        uuid PRIMARY KEY,
    logical_call_id uuid NOT NULL,
    request         jsonb NOT NULL,
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'applied', 'refused')),
    reason          text,
    received_at     timestamptz NOT NULL DEFAULT now(),
    concluded_at    timestamptz
);
CREATE INDEX resolutions_pending ON resolutions (logical_call_id) WHERE status = 'pending';
