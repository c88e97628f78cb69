package searchbench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/threadline/threadline/store"
)

// common are frequent English words: the head of the corpus's skewed draw.
var common = strings.Fields(`time year people way day man thing woman life child world school state family
student group country problem hand part place case week company system program question work government number
night point home water room mother area money story fact month lot right study book eye job word business issue
side kind head house service friend father power hour game line end member law car city community name president
team minute idea kid body information back parent face others level office door health person art war history party
result change morning reason research girl guy moment air teacher force education server database query index
request response error function value type file config client cache token stream thread message branch model`)

// syllables make the corpus's rarer, made-up words.
var syllables = strings.Fields(`ka lo mi ven tar qui zor bel fen dra mus pol rin sha tov ul wex yad cro gim`)

// verbs and nouns make camelCase identifiers: parseConfigFile.
var (
	verbs = strings.Fields(`parse load read write build make open close merge split fetch store render resolve
validate encode decode flush apply handle`)
	nouns = strings.Fields(`Config File User Cache Token Stream Thread Message Branch Model Request Response
Error Value Index Query Server Client Session Event Record Table Column Schema Policy Route Handler Writer Reader Buffer`)
)

// phrases are planted in every twentieth message, for phrase queries.
var phrases = []string{
	"retry budget exhausted", "connection pool saturated", "quarterly revenue forecast", "garbage collector pause",
	"migration rolled back", "deadline exceeded twice", "snapshot isolation anomaly", "cold start latency",
	"feature flag rollout", "memory leak suspected", "index bloat warning", "replica lag spike",
}

type corpus struct {
	opt    options
	words  []string // common first, then made-up
	idents []string
}

func newCorpus(opt options) *corpus {
	c := &corpus{opt: opt}
	c.words = append(c.words, common...)
	r := rand.New(rand.NewPCG(7, 7))
	seen := map[string]bool{}
	for len(c.words) < 3000 {
		var b strings.Builder
		for range 2 + r.IntN(2) {
			b.WriteString(syllables[r.IntN(len(syllables))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			c.words = append(c.words, w)
		}
	}
	// A dozen nouns: a few thousand identifiers, each used many times.
	for _, v := range verbs {
		for _, n1 := range nouns[:12] {
			for _, n2 := range nouns[:12] {
				if n1 != n2 {
					c.idents = append(c.idents, v+n1+n2)
				}
			}
		}
	}
	return c
}

// prose draws n words as the load's SQL does (skewed to the head).
func (c *corpus) prose(r *rand.Rand, n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = c.words[int(float64(len(c.words))*math.Pow(r.Float64(), 3))]
	}
	return strings.Join(ws, " ")
}

func (c *corpus) ident(i int) string { return c.idents[i%len(c.idents)] }

// kinds are the kinds of queries measured.
func (c *corpus) kinds() []kind {
	n := len(c.words)
	return []kind{
		{"common_word", func(r *rand.Rand) string { return c.words[r.IntN(10)] }},
		{"two_common_words", func(r *rand.Rand) string { return c.words[r.IntN(20)] + " " + c.words[r.IntN(20)] }},
		{"rare_word", func(r *rand.Rand) string { return c.words[n-1-r.IntN(500)] }},
		{"phrase", func(r *rand.Rand) string { return `"` + phrases[r.IntN(len(phrases))] + `"` }},
		{"prefix", func(r *rand.Rand) string {
			w := c.words[len(common)+r.IntN(200)]
			return w[:min(len(w), 4)] + "*"
		}},
		{"identifier_part", func(r *rand.Rand) string {
			return nouns[r.IntN(12)] + nouns[r.IntN(12)]
		}},
		{"identifier_whole", func(r *rand.Rand) string { return c.idents[r.IntN(len(c.idents))] }},
	}
}

// corpusSQL inserts the threads [$1, $2) and their checkpoints; $3 is
// the checkpoints per thread, $4 the callers, $5 the words, $6 the
// identifiers, $7 the phrases, $8 the first time.
const corpusSQL = `
WITH th AS (
	INSERT INTO threads (id, caller, title, metadata, last_seq, created_at, updated_at)
	SELECT md5('t' || i)::uuid, 'caller_' || (i % $4), 'Thread ' || i || ' about ' || ($5::text[])[1 + (i % 50)], '{}', $3,
		$8::timestamptz + make_interval(mins => i), $8::timestamptz + make_interval(mins => i)
	FROM generate_series($1::int, $2::int - 1) i
	RETURNING 1
)
INSERT INTO checkpoints (thread_id, id, parent_id, seq, role, content, created_at)
SELECT md5('t' || i)::uuid, md5('m' || i || '.' || s)::uuid,
	CASE WHEN s = 1 THEN NULL WHEN s % 10 = 0 THEN md5('m' || i || '.' || (s - 2))::uuid ELSE md5('m' || i || '.' || (s - 1))::uuid END,
	s, CASE WHEN s % 2 = 1 THEN 'user' ELSE 'assistant' END,
	CASE WHEN s % 14 = 0 THEN jsonb_build_array(
		jsonb_build_object('type', 'text', 'text', txt),
		jsonb_build_object('type', 'tool-call', 'toolCallId', 'call_' || s, 'toolName', 'read_file',
			'args', jsonb_build_object('path', '/src/' || ident || '.go'), 'argsText', '{"path":"/src/' || ident || '.go"}',
			'result', jsonb_build_object('bytes', s * 37, 'first_line', 'package ' || lower(ident))))
	ELSE jsonb_build_array(jsonb_build_object('type', 'text', 'text', txt)) END,
	$8::timestamptz + make_interval(mins => i, secs => s)
FROM (SELECT (SELECT count(*) FROM th) AS n) AS forced,
	generate_series($1::int, $2::int - 1) i, generate_series(1, $3::int) s,
	LATERAL (SELECT ($6::text[])[1 + ((i * 31 + s * 17) % array_length($6::text[], 1))] AS ident) id,
	LATERAL (SELECT (SELECT string_agg(($5::text[])[1 + floor(array_length($5::text[], 1) * power(random(), 3))::int], ' ')
			FROM generate_series(1, 20 + (random() * 40)::int + 0 * s))
		|| CASE WHEN s % 5 = 0 THEN E'\n` + "```go\\nfunc ' || ident || E'(path string) error {\\n\\treturn ' || ($6::text[])[1 + ((i + s) % array_length($6::text[], 1))] || E'(path)\\n}\\n```" + `' ELSE '' END
		|| CASE WHEN (i + s) % 20 = 0 THEN ' ' || ($7::text[])[1 + ((i * 7 + s) % array_length($7::text[], 1))] || '.' ELSE '' END AS txt) t`

// load writes the corpus in batches of threads, without the search
// indexes: after each batch one SearchIndexBatch moves the batch's queued
// checkpoints into checkpoint_search; the indexes are built at the end.
func (c *corpus) load(ctx context.Context, pool *pgxpool.Pool, st *store.Store, res *Result, progress func(string, ...any)) error {
	per := c.opt.messages / c.opt.threads
	if _, err := pool.Exec(ctx, `DROP INDEX checkpoint_search_code; DROP INDEX checkpoint_search_tsv`); err != nil {
		return fmt.Errorf("drop the search indexes before the load: %w", err)
	}
	started := time.Now()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	batch := max(1, 20000/per)
	for lo := 0; lo < c.opt.threads; lo += batch {
		hi := min(c.opt.threads, lo+batch)
		if _, err := pool.Exec(ctx, corpusSQL, lo, hi, per, c.opt.callers, c.words, c.idents, phrases, at); err != nil {
			return fmt.Errorf("load threads %d–%d: %w", lo, hi, err)
		}
		if _, _, err := st.SearchIndexBatch(ctx, math.MaxInt32); err != nil {
			return fmt.Errorf("index threads %d–%d: %w", lo, hi, err)
		}
		if hi%(batch*10) == 0 || hi == c.opt.threads {
			progress("loaded %d of %d threads (%d checkpoints) in %.0f s", hi, c.opt.threads, hi*per, time.Since(started).Seconds())
		}
	}
	res.LoadS = time.Since(started).Seconds()
	started = time.Now()
	if _, err := pool.Exec(ctx, `SET maintenance_work_mem = '256MB'`); err != nil {
		return err
	}
	for _, sql := range []string{
		`CREATE INDEX checkpoint_search_tsv ON checkpoint_search USING gin (caller, tsv) WITH (fastupdate = off)`,
		`CREATE INDEX checkpoint_search_code ON checkpoint_search USING gin (caller, code gin_trgm_ops) WITH (fastupdate = off)`,
		`VACUUM ANALYZE threads`, `VACUUM ANALYZE checkpoints`, `VACUUM ANALYZE checkpoint_search`, `VACUUM ANALYZE checkpoint_search_pending`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
	}
	res.IndexBuildS = time.Since(started).Seconds()
	progress("indexes built in %.0f s", res.IndexBuildS)
	return nil
}
