-- Back to 0016: the generated column and its indexes on checkpoints.
DROP TRIGGER checkpoints_search_enqueue ON checkpoints;
DROP FUNCTION checkpoint_search_enqueue();
DROP TABLE checkpoint_search_pending;
DROP TABLE checkpoint_search;
DROP FUNCTION search_code_text(text);
ALTER TABLE checkpoints ADD COLUMN search_tsv tsvector
    GENERATED ALWAYS AS (to_tsvector('english'::regconfig, checkpoint_search_text(content))) STORED;
CREATE INDEX checkpoints_search_tsv ON checkpoints USING gin (search_tsv);
CREATE INDEX checkpoints_search_code ON checkpoints USING gin (checkpoint_code_text(content) gin_trgm_ops);
-- btree_gin stays: other objects of the database may use it.
