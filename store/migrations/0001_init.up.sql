-- Threads are mutable rows (title, metadata, head); checkpoints are not.
CREATE TABLE threads (
    id         uuid PRIMARY KEY,
    caller     text        NOT NULL,
    title      text,
    metadata   jsonb       NOT NULL DEFAULT '{}',
    -- head_id is the message the client shows (view state, not a checkpoint).
    head_id    uuid,
    -- last_seq numbers this thread's checkpoints; bumping it under the row
    -- lock serializes writers of one thread.
    last_seq   bigint      NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX threads_caller_updated ON threads (caller, updated_at DESC, id DESC);

-- A checkpoint is one immutable message with a parent pointer. The message id
-- is the checkpoint id. Appending writes one row and rewrites nothing.
CREATE TABLE checkpoints (
    thread_id   uuid        NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    id          uuid        NOT NULL,
    parent_id   uuid,
    seq         bigint      NOT NULL,
    role        text        NOT NULL CHECK (role IN ('user', 'assistant', 'system')),
    content     jsonb       NOT NULL,
    status      jsonb,
    attachments jsonb,
    run_id      uuid,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (thread_id, id),
    UNIQUE (thread_id, seq),
    -- A parent always belongs to the same thread.
    FOREIGN KEY (thread_id, parent_id) REFERENCES checkpoints (thread_id, id),
    CHECK (parent_id IS DISTINCT FROM id)
);

-- Checkpoints are never updated or deleted on their own; deleting the whole
-- thread (which cascades here after the thread row is gone) is the only way.
CREATE FUNCTION checkpoints_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND NOT EXISTS (SELECT 1 FROM threads WHERE id = OLD.thread_id) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'checkpoints are immutable: % is not allowed', TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;
CREATE TRIGGER checkpoints_immutable BEFORE UPDATE OR DELETE ON checkpoints
    FOR EACH ROW EXECUTE FUNCTION checkpoints_immutable();
CREATE TRIGGER checkpoints_no_truncate BEFORE TRUNCATE ON checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION checkpoints_immutable();

-- A run is one model invocation. Its row changes (status, lease); its
-- messages are checkpoints and its events live in run_events.
CREATE TABLE runs (
    id               uuid        PRIMARY KEY,
    thread_id        uuid        NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    status           text        NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'cancelled', 'interrupted')),
    user_message_id  uuid,
    parent_id        uuid        NOT NULL,
    message_id       uuid        NOT NULL,
    model            text        NOT NULL,
    config           jsonb,
    usage            jsonb,
    error            jsonb,
    owner            text,
    lease_until      timestamptz,
    cancel_requested boolean     NOT NULL DEFAULT false,
    tree_seq         bigint      NOT NULL,
    created_at       timestamptz NOT NULL,
    finished_at      timestamptz
);
-- One run at a time per thread, enforced by the database.
CREATE UNIQUE INDEX runs_one_active ON runs (thread_id) WHERE status = 'running';
CREATE INDEX runs_thread ON runs (thread_id, user_message_id);
CREATE INDEX runs_lease ON runs (lease_until) WHERE status = 'running';

-- The durable event log. While a run streams, each group commit adds one
-- segment; when it ends, the segments are replaced by one compact segment
-- whose token texts live in the assistant checkpoint.
CREATE TABLE run_events (
    run_id    uuid   NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    last_seq  bigint NOT NULL,
    first_seq bigint NOT NULL,
    data      bytea  NOT NULL,
    PRIMARY KEY (run_id, last_seq)
);
