-- A run whose agent turn waits for a person (a client tool's result, an
-- approval) ends requires_action.
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('running', 'succeeded', 'failed', 'cancelled', 'interrupted', 'requires_action'));
