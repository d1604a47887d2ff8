-- The warehouse's own state. Stock never goes negative; every change bumps version.
CREATE TABLE stock (
    sku        text PRIMARY KEY,
    available  bigint NOT NULL CHECK (available >= 0),
    version    bigint NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- operation_key is UNIQUE in every effect table as well as in idempotency_keys: even a bug in
-- the key helper cannot apply one intent twice.
CREATE TABLE reservations (
    reservation_id  text PRIMARY KEY,
    tenant          text NOT NULL,
    sku             text NOT NULL REFERENCES stock (sku),
    order_id        text NOT NULL,
    quantity        bigint NOT NULL CHECK (quantity > 0),
    tags            text[] NOT NULL DEFAULT '{}',
    hold_until      timestamptz,
    operation_key   text NOT NULL UNIQUE,
    logical_call_id uuid NOT NULL,
    attempt         integer NOT NULL,
    fence           bigint NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX reservations_by_order ON reservations (order_id);

-- One release per reservation, whatever the key: the primary key is the last word on
-- "gives the quantity back once".
CREATE TABLE releases (
    reservation_id  text PRIMARY KEY REFERENCES reservations (reservation_id),
    quantity        bigint NOT NULL CHECK (quantity > 0),
    operation_key   text NOT NULL UNIQUE,
    logical_call_id uuid NOT NULL,
    attempt         integer NOT NULL,
    fence           bigint NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE shipments (
    shipment_id     text PRIMARY KEY,
    tenant          text NOT NULL,
    order_id        text NOT NULL,
    address         text NOT NULL,
    operation_key   text NOT NULL UNIQUE,
    logical_call_id uuid NOT NULL,
    attempt         integer NOT NULL,
    fence           bigint NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX shipments_by_order ON shipments (order_id);

-- The downstream SDK's key table (shared/downstream/idempotent_write.py). A row and the domain
-- write it settles commit together; response is the answer every replay returns.
CREATE TABLE idempotency_keys (
    operation_key text PRIMARY KEY,
    request_hash  text NOT NULL,
    response      jsonb,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- The highest dispatcher fence seen per run (shared/downstream/fences.py).
CREATE TABLE fences (scope text PRIMARY KEY, fence bigint NOT NULL);
