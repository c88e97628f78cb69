-- search_code_text (0017) ran its regular expression, with a look-ahead
-- at every word, over the whole of every message, though most messages
-- hold no code-like word at all. It now first checks in one anchored pass
-- whether every word is plain, and answers NULL then: the old answer was
-- NULL or only the whitespace around the words, which no search matches
-- (a substring search looks for a code-like word, never for whitespace).
CREATE OR REPLACE FUNCTION search_code_text(doc text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN doc ~ '^[[:space:]]*([[:alpha:]][[:lower:]]*[,.;:!?)"'']*([[:space:]]+|$))*$' THEN NULL
    ELSE nullif(btrim(regexp_replace(doc,
        '(^|[[:space:]])[[:alpha:]][[:lower:]]*[,.;:!?)"'']*(?=[[:space:]]|$)', ' ', 'g')), '') END
$$;
