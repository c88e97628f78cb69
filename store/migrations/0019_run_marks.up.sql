-- When a run's steps happened, for its trace (GET …/runs/{run_id}/trace).
-- The event log keeps no times: a running run's segments share run_log
-- rows that are deleted once it ends, and its ended log is one compacted
-- run_events row. A mark is the commit time of a group commit's segment
-- of one run that holds a tool call, a tool result or an error record:
-- the edges of an agent's steps and tool calls (store.RunEventsAppend).
-- seq is the segment's last sequence. Commits of tokens alone write none,
-- so a chat reply costs nothing here. Append-only; the run's marks go with
-- it (no foreign key, as run_events: see 0005; the trigger below).
CREATE TABLE run_marks (
    run_id     uuid        NOT NULL,
    seq        bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, seq)
);

CREATE FUNCTION run_marks_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM run_marks m USING deleted_runs d WHERE m.run_id = d.id;
    RETURN NULL;
END;
$$;
CREATE TRIGGER runs_delete_marks AFTER DELETE ON runs
    REFERENCING OLD TABLE AS deleted_runs
    FOR EACH STATEMENT EXECUTE FUNCTION run_marks_delete();
