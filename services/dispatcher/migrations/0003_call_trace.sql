-- The trace a call belongs to (W3C traceparent of the authorization that created it): every
-- step of the call continues it, so its requests and events join the proposal's trace.
ALTER TABLE calls ADD COLUMN traceparent text;
