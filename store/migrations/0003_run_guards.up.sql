-- The checks that open and close a run, as functions, so that RunCreate and
-- RunFinish each go to Postgres as one pipelined batch in one implicit
-- transaction: a failed check raises, and the whole batch rolls back.
-- Error codes (store.interpretError maps them): P0002 not found, TL409 a run
-- is in progress (DETAIL: "<run id> <message id>"), TL410 the run already
-- ended, TL412 the thread changed since the fork was resolved.

-- threadline_run_begin locks the thread of a new run and checks that no run
-- is active and that the thread still ends at want.
CREATE FUNCTION threadline_run_begin(p_thread uuid, p_caller text, p_want bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_last bigint;
    v_run  uuid;
    v_msg  uuid;
BEGIN
    SELECT last_seq INTO v_last FROM threads WHERE id = p_thread AND caller = p_caller FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'thread % not found', p_thread USING ERRCODE = 'P0002';
    END IF;
    -- A new statement, so a new snapshot: it sees a run that committed while
    -- this one waited for the lock.
    SELECT id, message_id INTO v_run, v_msg FROM runs WHERE thread_id = p_thread AND status = 'running';
    IF FOUND THEN
        RAISE EXCEPTION 'run % is in progress on this thread; cancel it or rejoin it', v_run
            USING ERRCODE = 'TL409', DETAIL = v_run::text || ' ' || v_msg::text;
    END IF;
    IF v_last <> p_want THEN
        RAISE EXCEPTION 'thread % changed while the run was being started; retry', p_thread USING ERRCODE = 'TL412';
    END IF;
END;
$$;

-- threadline_run_end locks a running run, and numbers its reply: the
-- thread's next checkpoint must be p_seq.
CREATE FUNCTION threadline_run_end(p_run uuid, p_thread uuid, p_seq bigint, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
    v_last   bigint;
BEGIN
    SELECT status INTO v_status FROM runs WHERE id = p_run FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % not found', p_run USING ERRCODE = 'P0002';
    END IF;
    IF v_status <> 'running' THEN
        RAISE EXCEPTION 'run % already ended as %', p_run, v_status USING ERRCODE = 'TL410';
    END IF;
    UPDATE threads SET last_seq = last_seq + 1, updated_at = p_now WHERE id = p_thread RETURNING last_seq INTO v_last;
    IF v_last IS DISTINCT FROM p_seq THEN
        RAISE EXCEPTION 'thread % changed during run %', p_thread, p_run USING ERRCODE = 'TL412';
    END IF;
END;
$$;
