-- Runs that ended requires_action read as succeeded (their turn ended).
UPDATE runs SET status = 'succeeded' WHERE status = 'requires_action';
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('running', 'succeeded', 'failed', 'cancelled', 'interrupted'));
