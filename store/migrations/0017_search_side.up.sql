-- Search off the turn's commit (issue 32, after 0014 and 0016). A turn
-- used to compute its checkpoints' tsvector and code text and update two
-- GIN indexes inside its own transaction. Now the turn only queues its
-- checkpoints (a trigger: every way a checkpoint is written queues it),
-- and the store's search indexer (store.SearchIndexer) moves the queue
-- into checkpoint_search after the commit, a batch at a time. The queue
-- is written in the turn's transaction, so a crash never leaves a message
-- unsearchable: the next indexer, in any replica, takes it.
CREATE EXTENSION IF NOT EXISTS btree_gin;

-- search_code_text is checkpoint_code_text (0016) of a search text: the
-- words that are not plain, where a code-like query is a substring.
CREATE FUNCTION search_code_text(doc text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT nullif(btrim(regexp_replace(doc,
        '(^|[[:space:]])[[:alpha:]][[:lower:]]*[,.;:!?)"'']*(?=[[:space:]]|$)', ' ', 'g')), '')
$$;

-- checkpoint_search_pending is the queue: checkpoints not yet indexed.
-- No key and no index: an insert is one small heap row; the indexer takes
-- rows by ctid with SKIP LOCKED, so indexers of several replicas take
-- disjoint batches.
CREATE TABLE checkpoint_search_pending (
    thread_id     uuid NOT NULL,
    checkpoint_id uuid NOT NULL
);

CREATE FUNCTION checkpoint_search_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO checkpoint_search_pending (thread_id, checkpoint_id) SELECT thread_id, id FROM new_checkpoints;
    RETURN NULL;
END;
$$;
CREATE TRIGGER checkpoints_search_enqueue AFTER INSERT ON checkpoints
    REFERENCING NEW TABLE AS new_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION checkpoint_search_enqueue();

-- checkpoint_search is one row per indexed checkpoint, with what a search
-- filters on copied from the checkpoint and its thread (the caller, the
-- role, the time; a thread's caller never changes), so a search reads
-- this table's indexes alone. seq orders a thread's messages for the
-- common-word plan (store/search.go).
CREATE TABLE checkpoint_search (
    thread_id     uuid        NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    seq           bigint      NOT NULL,
    checkpoint_id uuid        NOT NULL,
    caller        text        NOT NULL,
    role          text        NOT NULL,
    created_at    timestamptz NOT NULL,
    tsv           tsvector    NOT NULL,
    code          text,
    PRIMARY KEY (thread_id, seq)
);

-- The backfill: every checkpoint written before this migration.
INSERT INTO checkpoint_search (thread_id, seq, checkpoint_id, caller, role, created_at, tsv, code)
SELECT c.thread_id, c.seq, c.id, t.caller, c.role, c.created_at, to_tsvector('english'::regconfig, d.doc), search_code_text(d.doc)
FROM checkpoints c JOIN threads t ON t.id = c.thread_id,
    LATERAL (SELECT checkpoint_search_text(c.content) AS doc) d;

-- The caller leads both GIN indexes (btree_gin), so a search reads only
-- the caller's entries of a word or trigram. fastupdate is off: the
-- indexer pays for the index insert, and no search scans a pending list.
CREATE INDEX checkpoint_search_tsv ON checkpoint_search USING gin (caller, tsv) WITH (fastupdate = off);
CREATE INDEX checkpoint_search_code ON checkpoint_search USING gin (caller, code gin_trgm_ops) WITH (fastupdate = off);

DROP INDEX checkpoints_search_code;
DROP INDEX checkpoints_search_tsv;
ALTER TABLE checkpoints DROP COLUMN search_tsv;
