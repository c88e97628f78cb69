DROP FUNCTION threadline_run_open(uuid, text, bigint, uuid, uuid);
