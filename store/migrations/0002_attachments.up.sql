-- Uploaded files. A user message references them by id; their bytes never
-- change once stored.
CREATE TABLE attachments (
    id           uuid        PRIMARY KEY,
    caller       text        NOT NULL,
    name         text        NOT NULL,
    content_type text        NOT NULL,
    size         bigint      NOT NULL,
    data         bytea       NOT NULL,
    created_at   timestamptz NOT NULL
);
