-- The group commit's claim check (threadline_log_append, migration 0009)
-- looked up every run of every commit: with a thousand runs streaming,
-- Postgres spent most of its time on those lookups. A run's claim, once
-- checked, can only be lost by a claim taken over it or by the run's row
-- going away; run_fence counts those events (gen), and an append checks
-- only the runs whose last check saw another count.
CREATE TABLE run_fence (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    gen bigint  NOT NULL
);
INSERT INTO run_fence (gen) VALUES (0);

-- A claim taken over a run (store.RunClaimExpired, whatever its version)
-- or a running run's row deleted (its thread deleted) moves the count, in
-- the transaction that does it: an append sees the new count exactly when
-- it can see the change.
CREATE FUNCTION threadline_fence_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE run_fence SET gen = gen + 1;
    RETURN NULL;
END;
$$;
CREATE TRIGGER runs_fence_claim AFTER UPDATE OF claim ON runs
    FOR EACH ROW WHEN (NEW.claim IS DISTINCT FROM OLD.claim)
    EXECUTE FUNCTION threadline_fence_move();
CREATE TRIGGER runs_fence_gone AFTER DELETE ON runs
    FOR EACH ROW WHEN (OLD.status = 'running')
    EXECUTE FUNCTION threadline_fence_move();

-- The group commit reads the count under the log lock and looks up only
-- the runs whose last check saw another (store.sqlLogAppend);
-- threadline_log_append (migration 0009) stays for processes of the
-- earlier version.
