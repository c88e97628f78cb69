-- run_log rows carry their time, so that the purge can move a long run's
-- segments out of rows older than a few seconds into the run's own
-- run_events row (store.RunLogPurge): a run that streams for minutes then
-- pins no shared rows, and a read of one run's log scans at most a few
-- seconds of them.
ALTER TABLE run_log ADD COLUMN created_at timestamptz NOT NULL DEFAULT now();
