ALTER TABLE run_log DROP COLUMN created_at;
