-- Search, cheaper to write and to read (issue 32, after 0014).

-- checkpoint_code_text is the code-like words of a checkpoint's search
-- text, space-separated, or NULL when it has none: the only words the
-- search matches as substrings (a query that looks like code, see
-- store/search.go's codeLike). A word is a run of non-space characters
-- holding an upper-case letter after its first character, a digit, one of
-- _ / # @ $, or a . : - followed by a character that is not punctuation
-- (so a sentence's last word, word. or word:, is not code). A code-like
-- query found inside a text is inside one such word: the query has no
-- space, and what makes it code-like is in the word too.
CREATE FUNCTION checkpoint_code_text(content jsonb) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT string_agg(w, ' ')
    FROM regexp_split_to_table(checkpoint_search_text(content), '[[:space:]]+') AS w
    WHERE w ~ '[^[:space:]][[:upper:]]|[[:digit:]_/#@$]|[.:-][^[:space:][:punct:]]'
$$;

-- The trigram index covers those words only, and only the checkpoints
-- that have some: prose is found by the full-text index.
DROP INDEX checkpoints_search_trgm;
CREATE INDEX checkpoints_search_code ON checkpoints USING gin (checkpoint_code_text(content) gin_trgm_ops)
    WHERE checkpoint_code_text(content) IS NOT NULL;
