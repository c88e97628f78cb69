-- A run's raw records, for audit and replay, never in snapshots: what the
-- provider streamed (its lines as received) and each tool's input and
-- output, each with the sequence of the event it produced (thread.RawRecord).
-- n numbers a run's records from 1 in the order they were received; total
-- is the bytes of data of the run's records up to this one, so an append
-- learns how much of the run's cap is used from the last row alone
-- (store.RunRawAppend). A run's records go with it, and so with its thread.
CREATE TABLE run_raw (
    run_id     uuid        NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    n          integer     NOT NULL,
    sequence   bigint      NOT NULL,
    source     text        NOT NULL,
    kind       text        NOT NULL,
    -- json, not jsonb: kept byte for byte as the provider or tool sent it.
    data       json        NOT NULL,
    total      bigint      NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, n)
);
