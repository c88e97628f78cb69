DROP INDEX IF EXISTS threads_caller_updated_top;
DROP INDEX IF EXISTS threads_parent;
ALTER TABLE threads
    DROP COLUMN IF EXISTS depth,
    DROP COLUMN IF EXISTS parent_tool_call_id,
    DROP COLUMN IF EXISTS parent_message_id,
    DROP COLUMN IF EXISTS parent_run_id,
    DROP COLUMN IF EXISTS parent_thread_id;
