-- The audit API lists a tool's effects by the time they were applied (downstreams/wallet/audit_api.py).
CREATE INDEX debits_by_time ON debits (created_at, debit_id);
CREATE INDEX refunds_by_time ON refunds (created_at, refund_id);
