-- A run's start and end each write the thread and the run rows once.
--
-- threadline_run_finish ends a run in two statements where a run's end
-- took five: threadline_run_end (0009) locked the run (SELECT FOR UPDATE)
-- and moved the thread's end, then the run's row, and the thread's title,
-- were each updated again. Now one UPDATE of the run checks its claim and
-- status and writes its end, and one UPDATE of the thread moves its end
-- and fills an empty title: one new version of each row, no lock record.
-- The errors are threadline_run_end's: TL411 when the run is gone or
-- under another claim, TL410 when it is not running any more (DETAIL: the
-- run id), TL412 when the thread's end moved. threadline_run_end stays for
-- a replica of the previous release during an upgrade.
CREATE FUNCTION threadline_run_finish(p_run uuid, p_thread uuid, p_seq bigint, p_now timestamptz, p_claim bigint,
    p_status text, p_model text, p_usage jsonb, p_error jsonb, p_title text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
    v_claim  bigint;
    v_last   bigint;
BEGIN
    UPDATE runs SET status = p_status, model = p_model, usage = p_usage, error = p_error, finished_at = p_now,
        owner = NULL, lease_until = NULL
    WHERE id = p_run AND claim = p_claim AND status = 'running';
    IF NOT FOUND THEN
        SELECT status, claim INTO v_status, v_claim FROM runs WHERE id = p_run;
        IF NOT FOUND OR v_claim <> p_claim THEN
            RAISE EXCEPTION 'run % was taken over or deleted', p_run USING ERRCODE = 'TL411', DETAIL = p_run::text;
        END IF;
        RAISE EXCEPTION 'run % already ended as %', p_run, v_status USING ERRCODE = 'TL410', DETAIL = p_run::text;
    END IF;
    UPDATE threads SET last_seq = last_seq + 1, updated_at = p_now, title = coalesce(title, p_title)
    WHERE id = p_thread RETURNING last_seq INTO v_last;
    IF v_last IS DISTINCT FROM p_seq THEN
        RAISE EXCEPTION 'thread % changed during run %', p_thread, p_run USING ERRCODE = 'TL412';
    END IF;
END;
$$;

-- threadline_run_start is threadline_run_open (0004) that also moves the
-- thread's end and head to the run's, which the start wrote in a statement
-- of its own after locking the thread (SELECT FOR NO KEY UPDATE): now the
-- update is the lock. When it finds no thread at p_want for p_caller,
-- threadline_run_begin says why (P0002, TL409, TL412) in the order it
-- always has. The update makes a run that committed while it waited for
-- the row visible to the next statement, so the run check still sees it.
CREATE FUNCTION threadline_run_start(p_thread uuid, p_caller text, p_want bigint, p_message uuid, p_parent uuid,
    p_seq bigint, p_head uuid, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_run uuid;
    v_msg uuid;
BEGIN
    UPDATE threads SET last_seq = p_seq, head_id = p_head, updated_at = p_now
    WHERE id = p_thread AND caller = p_caller AND last_seq = p_want;
    IF FOUND THEN
        SELECT id, message_id INTO v_run, v_msg FROM runs WHERE thread_id = p_thread AND status = 'running';
        IF FOUND THEN
            RAISE EXCEPTION 'run % is in progress on this thread; cancel it or rejoin it', v_run
                USING ERRCODE = 'TL409', DETAIL = v_run::text || ' ' || v_msg::text;
        END IF;
    ELSE
        PERFORM threadline_run_begin(p_thread, p_caller, p_want);
        UPDATE threads SET last_seq = p_seq, head_id = p_head, updated_at = p_now WHERE id = p_thread;
    END IF;
    IF p_message IS NOT NULL AND EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = p_thread AND id = p_message) THEN
        RAISE EXCEPTION 'message % already exists in thread %', p_message, p_thread
            USING ERRCODE = 'unique_violation', CONSTRAINT = 'checkpoints_pkey';
    END IF;
    IF p_parent IS NOT NULL AND NOT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = p_thread AND id = p_parent) THEN
        RAISE EXCEPTION 'parent % is not a message of thread %', p_parent, p_thread
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'checkpoints_thread_id_parent_id_fkey';
    END IF;
END;
$$;
