-- The demo's one aggregate: a ping that a consumer moves from 'sent' to 'received'.
CREATE TABLE pings (
    id      text PRIMARY KEY,
    state   text NOT NULL,
    version bigint NOT NULL
);
