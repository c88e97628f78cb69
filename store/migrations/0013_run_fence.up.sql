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

-- threadline_log_append with p_seen: for each run of p_runs the count its
-- claim was last checked at (NULL: never). Under the same lock as the
-- three-argument version (which stays for processes of the earlier
-- version), it reads the count once it holds the lock and checks only the
-- runs whose p_seen differs; it appends p_data if none is lost, and
-- returns the lost runs (NULL: none) and the count, which every run of an
-- accepted append was checked at.
CREATE FUNCTION threadline_log_append(p_data bytea, p_runs uuid[], p_claims bigint[], p_seen bigint[],
    OUT lost uuid[], OUT gen bigint)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(21580, 1);
    SELECT f.gen INTO gen FROM run_fence f;
    SELECT array_agg(c.id) INTO lost FROM unnest(p_runs, p_claims, p_seen) AS c(id, claim, seen)
    WHERE c.seen IS DISTINCT FROM gen
      AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = c.id AND r.claim = c.claim AND r.status = 'running');
    IF lost IS NULL THEN
        INSERT INTO run_log (data) VALUES (p_data);
    END IF;
END;
$$;
