-- The operator console's health charts (issue 9): what the pipeline looked like over the last
-- hour, sampled by every projection replica (services/projection/health_sampler.py). Relay
-- backlog and consumer lag are positions that only exist "now", so they are kept here as a
-- series; retry amplification, duplicates prevented and compensation outcomes are derived
-- from the event history by the query API instead.
--   metric   relay_backlog (subject: an outbox schema; value: pending rows) or
--            consumer_lag (subject: a consumer group; value: records not yet committed)
--   bucket   the sample's time rounded down to the sampling interval: replicas that sample
--            in the same interval write one row (ON CONFLICT DO NOTHING), not one each.
CREATE TABLE health_samples (
    metric      text NOT NULL,
    subject     text NOT NULL,
    bucket      timestamptz NOT NULL,
    value       double precision NOT NULL,
    PRIMARY KEY (metric, bucket, subject)
);
CREATE INDEX health_samples_by_bucket ON health_samples (bucket);

-- The derived charts read one hour of a few event types; without this they would scan the
-- whole history.
CREATE INDEX events_by_type_and_time ON events (event_type, occurred_at);
