-- A running run's segments in run_log are lost: it ends as interrupted with
-- the text of its start row's log.
ALTER TABLE runs DROP COLUMN log_from;
DROP TABLE run_log;
