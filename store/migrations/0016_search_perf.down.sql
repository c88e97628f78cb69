DROP INDEX checkpoints_search_code;
DROP FUNCTION checkpoint_code_text(jsonb);
CREATE INDEX checkpoints_search_trgm ON checkpoints USING gin (checkpoint_search_text(content) gin_trgm_ops);
