DROP FUNCTION threadline_run_finish(uuid, uuid, bigint, timestamptz, bigint, text, text, jsonb, jsonb, text);
DROP FUNCTION threadline_run_start(uuid, text, bigint, uuid, uuid, bigint, uuid, timestamptz);
