-- Fencing: a run's claim is an epoch, 0 when the run starts and one more
-- each time recovery takes the run over (store.RunClaimExpired). Every
-- write of the run's owner (a group commit's log append, the run's end, a
-- lease renewal) names the claim it holds and is refused when the run's is
-- another: an owner that stalled past its lease writes nothing more, and,
-- since it publishes only what it wrote, no client receives an event that
-- is not in the stored log. Claims are per run, so one run whose end
-- cannot be written lapses alone, not with every run of its process.
ALTER TABLE runs ADD COLUMN claim bigint NOT NULL DEFAULT 0;

-- threadline_run_end gains the claim: TL411 when the run is gone or under
-- another claim, TL410 when it is not running any more (DETAIL: the run id).
DROP FUNCTION threadline_run_end(uuid, uuid, bigint, timestamptz);
CREATE FUNCTION threadline_run_end(p_run uuid, p_thread uuid, p_seq bigint, p_now timestamptz, p_claim bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
    v_claim  bigint;
    v_last   bigint;
BEGIN
    SELECT status, claim INTO v_status, v_claim FROM runs WHERE id = p_run FOR UPDATE;
    IF NOT FOUND OR v_claim <> p_claim THEN
        RAISE EXCEPTION 'run % was taken over or deleted', p_run USING ERRCODE = 'TL411', DETAIL = p_run::text;
    END IF;
    IF v_status <> 'running' THEN
        RAISE EXCEPTION 'run % already ended as %', p_run, v_status USING ERRCODE = 'TL410', DETAIL = p_run::text;
    END IF;
    UPDATE threads SET last_seq = last_seq + 1, updated_at = p_now WHERE id = p_thread RETURNING last_seq INTO v_last;
    IF v_last IS DISTINCT FROM p_seq THEN
        RAISE EXCEPTION 'thread % changed during run %', p_thread, p_run USING ERRCODE = 'TL412';
    END IF;
END;
$$;

-- threadline_log_append is the group commit's one statement: it appends
-- p_data (one run_log row holding a segment of each run in p_runs) if every
-- run is still running under its claim in p_claims, and returns NULL; else
-- it appends nothing and returns the runs that are not. It holds advisory
-- lock (21580, 1) shared until its commit, and checks the claims in a
-- statement of its own, whose snapshot is taken once it holds the lock. A
-- claim (store.RunClaimExpired) takes that lock exclusively before it
-- commits, so every append either commits before the claim, and is in
-- the log the claimer reads next, or checks after it, and is refused.
CREATE FUNCTION threadline_log_append(p_data bytea, p_runs uuid[], p_claims bigint[]) RETURNS uuid[]
LANGUAGE plpgsql AS $$
DECLARE
    v_lost uuid[];
BEGIN
    PERFORM pg_advisory_xact_lock_shared(21580, 1);
    SELECT array_agg(c.id) INTO v_lost FROM unnest(p_runs, p_claims) AS c(id, claim)
    WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = c.id AND r.claim = c.claim AND r.status = 'running');
    IF v_lost IS NULL THEN
        INSERT INTO run_log (data) VALUES (p_data);
    END IF;
    RETURN v_lost;
END;
$$;
