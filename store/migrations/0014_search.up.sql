-- Full-text and trigram search over every checkpoint (GET /api/v1/search).
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- checkpoint_search_text is the text a checkpoint is found by: its text and
-- reasoning, each tool call's name, arguments and result, sources' titles
-- and URLs, files' names and data parts, one per line. Images are left out
-- (an image part holds a URL or data, not words). Only the first 250,000
-- characters count: to_tsvector refuses a text whose lexemes pass 1 MB,
-- and an append must never fail for its search document.
CREATE FUNCTION checkpoint_search_text(content jsonb) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT left(coalesce(string_agg(
        CASE p->>'type'
            WHEN 'text' THEN p->>'text'
            WHEN 'reasoning' THEN p->>'text'
            WHEN 'tool-call' THEN concat_ws(' ', p->>'toolName',
                coalesce(nullif(p->>'argsText', ''), (p->'args')::text), (p->'result')::text)
            WHEN 'source' THEN concat_ws(' ', p->>'title', p->>'url')
            WHEN 'file' THEN p->>'filename'
            WHEN 'data' THEN concat_ws(' ', p->>'name', (p->'data')::text)
        END, E'\n' ORDER BY n), ''), 250000)
    FROM jsonb_array_elements(CASE jsonb_typeof(content) WHEN 'array' THEN content ELSE '[]' END)
        WITH ORDINALITY AS e(p, n)
$$;

-- The search vector is a stored generated column: written by the insert
-- itself, so it can never drift from the checkpoint, and checkpoints stay
-- immutable. 'english' stems words (runs, running → run) and drops stop
-- words; names and code are found by the trigram index below.
ALTER TABLE checkpoints ADD COLUMN search_tsv tsvector
    GENERATED ALWAYS AS (to_tsvector('english'::regconfig, checkpoint_search_text(content))) STORED;
CREATE INDEX checkpoints_search_tsv ON checkpoints USING gin (search_tsv);
CREATE INDEX checkpoints_search_trgm ON checkpoints USING gin (checkpoint_search_text(content) gin_trgm_ops);
