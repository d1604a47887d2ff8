-- The downstream system's own state. Balances never go negative; every change bumps version.
CREATE TABLE wallets (
    id            text PRIMARY KEY,
    tenant        text NOT NULL,
    currency      text NOT NULL,
    balance_minor bigint NOT NULL CHECK (balance_minor >= 0),
    version       bigint NOT NULL DEFAULT 1,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- operation_key is UNIQUE here as well as in idempotency_keys: even a bug in the key helper
-- cannot apply one intent twice.
CREATE TABLE debits (
    debit_id        text PRIMARY KEY,
    wallet_id       text NOT NULL REFERENCES wallets (id),
    amount_minor    bigint NOT NULL CHECK (amount_minor > 0),
    currency        text NOT NULL,
    operation_key   text NOT NULL UNIQUE,
    logical_call_id uuid NOT NULL,
    attempt         integer NOT NULL,
    fence           bigint NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE refunds (
    refund_id       text PRIMARY KEY,
    debit_id        text NOT NULL REFERENCES debits (debit_id),
    wallet_id       text NOT NULL REFERENCES wallets (id),
    amount_minor    bigint NOT NULL CHECK (amount_minor > 0),
    currency        text NOT NULL,
    operation_key   text NOT NULL UNIQUE,
    logical_call_id uuid NOT NULL,
    attempt         integer NOT NULL,
    fence           bigint NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX refunds_by_debit ON refunds (debit_id);

-- The downstream SDK's key table (services/wallet/idempotent_write.py). A row and the domain
-- write it settles commit together; response is the answer every replay returns.
CREATE TABLE idempotency_keys (
    operation_key text PRIMARY KEY,
    request_hash  text NOT NULL,
    response      jsonb,
    created_at    timestamptz NOT NULL DEFAULT now()
);
