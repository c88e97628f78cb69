-- threadline_run_begin (0003) locked the thread FOR UPDATE, which also
-- waits for every transaction that holds the thread's key: a foreign key
-- check does (FOR KEY SHARE), such as the search indexer's insert of the
-- thread's last reply, which holds it until its batch commits. A new run on
-- that thread then waited for the whole batch. FOR NO KEY UPDATE still
-- makes starts, ends and changes of one thread wait for each other, and
-- waits for a delete; it leaves foreign key checks alone.
CREATE OR REPLACE FUNCTION threadline_run_begin(p_thread uuid, p_caller text, p_want bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_last bigint;
    v_run  uuid;
    v_msg  uuid;
BEGIN
    SELECT last_seq INTO v_last FROM threads WHERE id = p_thread AND caller = p_caller FOR NO KEY UPDATE;
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
