-- The event log's rows no longer reference runs through a foreign key.
-- Checking it looked up and share-locked the run's row once per row of
-- every group commit, a WAL record each: 40% of a 1,000-run commit
-- (BenchmarkRunEventsAppend). The service writes a run's records only
-- after the run's row is committed (thread.logWriter), and deleting runs
-- (which happens with their thread) deletes their log through the trigger
-- below, as the cascade did.
ALTER TABLE run_events DROP CONSTRAINT run_events_run_id_fkey;

CREATE FUNCTION run_events_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM run_events e USING deleted_runs d WHERE e.run_id = d.id;
    RETURN NULL;
END;
$$;
CREATE TRIGGER runs_delete_events AFTER DELETE ON runs
    REFERENCING OLD TABLE AS deleted_runs
    FOR EACH STATEMENT EXECUTE FUNCTION run_events_delete();
