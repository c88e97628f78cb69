DROP FUNCTION threadline_log_append(bytea, uuid[], bigint[]);
DROP FUNCTION threadline_run_end(uuid, uuid, bigint, timestamptz, bigint);
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
ALTER TABLE runs DROP COLUMN claim;
