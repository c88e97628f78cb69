-- threadline_run_open opens a run's transaction: it locks the thread (through
-- threadline_run_begin, with its checks) and checks everything else the
-- run's first writes would check, so that those writes can wait for the
-- run's first commit and a run that ends fast writes each row once:
-- the user message id is new in the thread (unique_violation on
-- checkpoints_pkey), and the parent the run appends under is in the thread
-- (foreign_key_violation on checkpoints_thread_id_parent_id_fkey). With the
-- thread locked, both stay true until the commit.
CREATE FUNCTION threadline_run_open(p_thread uuid, p_caller text, p_want bigint, p_message uuid, p_parent uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM threadline_run_begin(p_thread, p_caller, p_want);
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
