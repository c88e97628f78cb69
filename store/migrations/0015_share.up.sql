-- A share is a read-only link to one message's branch: the path from the
-- root to checkpoint_id, which never changes (checkpoints are immutable),
-- so only the ids are kept and the path is read again each time. The id
-- is random (uuid v4) and is the link's only secret. Revoking deletes the
-- row; deleting the thread deletes its shares.
CREATE TABLE shares (
    id            uuid        PRIMARY KEY,
    thread_id     uuid        NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    -- message_id is the message the owner shared (its wire id);
    -- checkpoint_id is the newest checkpoint of that message when shared.
    message_id    uuid        NOT NULL,
    checkpoint_id uuid        NOT NULL,
    caller        text        NOT NULL,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz,
    FOREIGN KEY (thread_id, checkpoint_id) REFERENCES checkpoints (thread_id, id) ON DELETE CASCADE
);
CREATE INDEX shares_thread ON shares (thread_id, created_at);
