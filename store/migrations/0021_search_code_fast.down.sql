CREATE OR REPLACE FUNCTION search_code_text(doc text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT nullif(btrim(regexp_replace(doc,
        '(^|[[:space:]])[[:alpha:]][[:lower:]]*[,.;:!?)"'']*(?=[[:space:]]|$)', ' ', 'g')), '')
$$;
