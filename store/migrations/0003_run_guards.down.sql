DROP FUNCTION threadline_run_end(uuid, uuid, bigint, timestamptz);
DROP FUNCTION threadline_run_begin(uuid, text, bigint);
