-- Sub-agents (issue 28): a thread a delegate tool call started names the
-- call: its parent thread, the parent's run and assistant message, and the
-- call's id. Deleting the parent thread deletes its children (and theirs).
-- depth is 0 for a top-level thread, the parent's + 1 for a child: the
-- bound THREADLINE_SUBAGENT_MAX_DEPTH is checked against it.
ALTER TABLE threads
    ADD COLUMN parent_thread_id    uuid REFERENCES threads (id) ON DELETE CASCADE,
    ADD COLUMN parent_run_id       uuid,
    ADD COLUMN parent_message_id   uuid,
    ADD COLUMN parent_tool_call_id text,
    ADD COLUMN depth               integer NOT NULL DEFAULT 0;

CREATE INDEX threads_parent ON threads (parent_thread_id) WHERE parent_thread_id IS NOT NULL;

-- GET /threads lists top-level threads only.
CREATE INDEX threads_caller_updated_top ON threads (caller, updated_at DESC, id DESC)
    WHERE parent_thread_id IS NULL;
