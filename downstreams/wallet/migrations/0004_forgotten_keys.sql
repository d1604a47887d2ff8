-- The wallet forgets operation keys past INTENTLEDGER_WALLET_KEY_RETENTION_S, as payment APIs do
-- (downstreams/wallet/forgetting.py): a request under a forgotten key is a new debit. A debit's
-- or refund's key is therefore no longer unique here. Within the retention idempotency_keys
-- makes one intent one effect; past it only the ledger's refusal to resend does
-- (docs/dispatch.md, "When the downstream forgets a key").
ALTER TABLE debits DROP CONSTRAINT debits_operation_key_key;
CREATE INDEX debits_by_operation_key ON debits (operation_key);
ALTER TABLE refunds DROP CONSTRAINT refunds_operation_key_key;
CREATE INDEX refunds_by_operation_key ON refunds (operation_key);
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
