-- Search, cheaper to write and to read (issue 32, after 0014).

-- checkpoint_code_text is a checkpoint's search text without its plain
-- words, or NULL when nothing is left: what the search matches
-- substrings in (a query that looks like code, see store/search.go's
-- codeLike). A plain word is a run of non-space characters made of a
-- letter, lower-case letters, then maybe . , ; : ! ? ) " or ' (Hello,
-- world. the). A code-like query found inside a text is inside a word
-- that is not plain: the query has no space, and what makes it code-like
-- (an upper-case letter after the first, a digit, one of _ / # @ $ - or a
-- . or : with more after it) is in that word too. One regexp_replace: it
-- costs an append less than a split into words would.
CREATE FUNCTION checkpoint_code_text(content jsonb) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT nullif(btrim(regexp_replace(checkpoint_search_text(content),
        '(^|[[:space:]])[[:alpha:]][[:lower:]]*[,.;:!?)"'']*(?=[[:space:]]|$)', ' ', 'g')), '')
$$;

-- The trigram index covers those words only: prose is found by the
-- full-text index. (Not partial: a predicate would compute the function
-- a second time on every append.)
DROP INDEX checkpoints_search_trgm;
CREATE INDEX checkpoints_search_code ON checkpoints USING gin (checkpoint_code_text(content) gin_trgm_ops);
