DROP INDEX checkpoints_search_trgm;
DROP INDEX checkpoints_search_tsv;
ALTER TABLE checkpoints DROP COLUMN search_tsv;
DROP FUNCTION checkpoint_search_text(jsonb);
-- pg_trgm stays: other objects of the database may use it.
