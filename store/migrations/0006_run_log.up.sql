-- The group commit writes one row per commit for every run in it, instead
-- of one row per run. At 1,000 streaming runs the per-run rows (each a
-- random-uuid index entry, deleted again when the run ends) were 39% of
-- Postgres's statement time. A row of run_log holds, for each run, one
-- segment: [16-byte run id][uvarint first][uvarint last][uvarint length]
-- [segment]. A running run's log is its start row in run_events plus its
-- segments in the run_log rows after runs.log_from; when the run ends, its
-- whole log is one compacted row in run_events, and run_log rows that no
-- running run needs are deleted (store.RunLogPurge).
CREATE TABLE run_log (
    id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    data bytea  NOT NULL
);
-- Tokens are short and the rows short-lived: compressing them costs CPU
-- and saves little.
ALTER TABLE run_log ALTER COLUMN data SET STORAGE EXTERNAL;

-- log_from is the last run_log id committed when the run started: its
-- segments are all in later rows (they are written only after its start
-- commits, so they take later ids).
ALTER TABLE runs ADD COLUMN log_from bigint NOT NULL DEFAULT 0;
