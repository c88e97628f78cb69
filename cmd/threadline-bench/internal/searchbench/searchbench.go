// Package searchbench is `threadline-bench search`: GET /search's store
// query (store.MessageSearch) over a corpus it builds on a fresh database
// it creates, migrates and drops.
//
// What is measured, and how:
//   - the corpus: --threads threads of --messages/--threads checkpoints
//     each, owned by --callers callers; every tenth checkpoint is a
//     sibling of the one before (an edit or a regeneration), so the
//     trees branch. Texts are 20–60 words drawn with a skew from a list of
//     common English words and made-up rarer ones; every fifth message
//     holds a line of Go with a camelCase identifier, every twentieth one
//     of a set of fixed phrases, and every seventh assistant message a
//     tool call. It is written with INSERT … SELECT over generate_series
//     (the insert trigger queues every checkpoint), each batch then
//     indexed by one store.SearchIndexBatch into checkpoint_search; the
//     two search indexes are dropped first and built after
//     (index_build_s).
//   - search_ms: store.MessageSearch of one page (limit 21, what the API
//     asks for a page of 20) as a random caller, wall time, per kind of
//     query: common words, rare words, phrases, prefixes, identifiers
//     (a part of one: the substring match of the trigram index).
//   - index_bytes_per_message: pg_relation_size of the GIN (tsvector) and
//     trigram (code-like words) indexes of checkpoint_search over the
//     number of checkpoints; search_table_bytes_per_message is the whole
//     side table's (pg_total_relation_size, indexes included);
//     tsv_bytes_per_message the tsvector column's average pg_column_size.
//   - searchable_after_commit_ms: turns of one message appended one at a
//     time, each at a random moment of the indexer's poll, with a
//     SearchIndexer running: from the append's return to the end of the
//     batch that indexed it.
//   - append_ms: a turn's writes (a user and an assistant checkpoint in
//     one transaction, store.CheckpointAppend) onto corpus threads, with
//     the search queue's trigger and an indexer running, then again
//     after dropping the trigger (no indexer): what search adds to a turn.
//     An untimed pass over the same threads comes first, so both timed
//     passes find their pages warm.
package searchbench

import (
	"context"
	"crypto/md5"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/cmd/threadline-bench/internal/bench"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/thread"
)

const usage = `usage: threadline-bench search [flags]

Builds a corpus of threads with branches, mixed prose and code, on a fresh
database (tl_bsearch_<pid>_<random>) on the server of --database-url, and
measures search latency per kind of query, the search indexes' size, and
what they add to a turn's writes. The database is dropped at the end.

Progress goes to stderr; the last line of stdout is one JSON object.

Flags:
`

type options struct {
	databaseURL string
	threads     int
	messages    int
	callers     int
	queries     int
	appends     int
	keepDB      bool
}

func parseFlags(args []string, getenv func(string) string, stdout, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("threadline-bench search", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.databaseURL, "database-url", getenv("THREADLINE_DATABASE_URL"),
		"Postgres URL of a database on the server to use; the user must be allowed to CREATE DATABASE. Empty: the project's own cluster (deploy/pg.sh start) ($THREADLINE_DATABASE_URL)")
	fs.IntVar(&o.threads, "threads", 10000, "threads in the corpus")
	fs.IntVar(&o.messages, "messages", 1000000, "checkpoints in the corpus (a multiple of --threads is used)")
	fs.IntVar(&o.callers, "callers", 100, "callers owning the threads (a search reads one caller's)")
	fs.IntVar(&o.queries, "queries", 200, "searches per kind of query")
	fs.IntVar(&o.appends, "appends", 300, "turn writes measured with and without the search index")
	fs.BoolVar(&o.keepDB, "keep-database", false, "do not drop the database at the end (for EXPLAIN and psql)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(stdout)
			fs.Usage()
			return o, flag.ErrHelp
		}
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("bench search takes no arguments, got %q (see --help)", fs.Args())
	}
	if o.threads < 1 || o.messages < o.threads || o.callers < 1 || o.callers > o.threads || o.queries < 1 || o.appends < 1 {
		return o, errors.New("need threads ≥ 1, messages ≥ threads, 1 ≤ callers ≤ threads, queries ≥ 1, appends ≥ 1")
	}
	return o, nil
}

// Latency is one kind of query's figures.
type Latency struct {
	Queries  int     `json:"queries"`
	P50ms    float64 `json:"p50_ms"`
	P99ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
	MeanHits float64 `json:"mean_hits"`
}

// Result is the JSON line the bench prints.
type Result struct {
	Machine             bench.Machine      `json:"machine"`
	Postgres            string             `json:"postgres"`
	GoVersion           string             `json:"go_version"`
	Commit              string             `json:"commit"`
	Threads             int                `json:"threads"`
	Messages            int64              `json:"messages"`
	Callers             int                `json:"callers"`
	LoadS               float64            `json:"load_s"`
	IndexBuildS         float64            `json:"index_build_s"`
	Search              map[string]Latency `json:"search_ms"`
	GINBytesPerMsg      float64            `json:"gin_index_bytes_per_message"`
	TrgmBytesPerMsg     float64            `json:"trgm_index_bytes_per_message"`
	IndexBytesPerMsg    float64            `json:"index_bytes_per_message"`
	SideBytesPerMsg     float64            `json:"search_table_bytes_per_message"`
	TsvBytesPerMsg      float64            `json:"tsv_bytes_per_message"`
	TextBytesPerMsg     float64            `json:"text_bytes_per_message"`
	AppendWithMs        Latency            `json:"append_with_index_ms"`
	AppendWithoutMs     Latency            `json:"append_without_index_ms"`
	AppendAddedMedianMs float64            `json:"append_added_median_ms"`
	SearchableMs        Latency            `json:"searchable_after_commit_ms"`
	DurationS           float64            `json:"duration_s"`
	StartedAt           string             `json:"started_at"`
}

// Run runs the bench; see usage.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	opt, err := parseFlags(args, getenv, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bench search: %w", err)
	}
	started := time.Now()
	progress := func(format string, a ...any) { fmt.Fprintf(stderr, "bench search: "+format+"\n", a...) }
	db, err := bench.ScratchDatabase(ctx, opt.databaseURL, "tl_bsearch", stderr, progress)
	if err != nil {
		return fmt.Errorf("bench search: %w", err)
	}
	defer func() {
		if opt.keepDB {
			progress("database %s kept (--keep-database): %s", db.Name, bench.RedactURL(db.URL))
			return
		}
		db.Drop()
	}()
	res := &Result{Machine: bench.MachineInfo(), GoVersion: runtime.Version(), Commit: bench.GitCommit(),
		StartedAt: started.UTC().Format(time.RFC3339), Threads: opt.threads, Callers: opt.callers, Search: map[string]Latency{}}
	if err := run(ctx, opt, db.URL, res, progress); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("bench search: interrupted: %w", ctx.Err())
		}
		return fmt.Errorf("bench search: %w", err)
	}
	res.DurationS = bench.Round(time.Since(started).Seconds(), 1)
	out, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", out)
	return err
}

func run(ctx context.Context, opt options, dbURL string, res *Result, progress func(string, ...any)) error {
	if err := store.MigrateUp(ctx, dbURL); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := pool.QueryRow(ctx, `SELECT version()`).Scan(&res.Postgres); err != nil {
		return err
	}
	c := newCorpus(opt)
	st := store.New(pool)
	if err := c.load(ctx, pool, st, res, progress); err != nil {
		return err
	}
	if err := sizes(ctx, pool, res); err != nil {
		return err
	}
	for _, k := range c.kinds() {
		lat, err := measureSearch(ctx, st, opt, k)
		if err != nil {
			return fmt.Errorf("search %s: %w", k.name, err)
		}
		res.Search[k.name] = lat
		progress("search %s: p50 %.2f ms, p99 %.2f ms, %.1f hits a page", k.name, lat.P50ms, lat.P99ms, lat.MeanHits)
	}
	if res.SearchableMs, err = measureSearchable(ctx, st, opt); err != nil {
		return err
	}
	progress("searchable after its commit: p50 %.2f ms, p99 %.2f ms", res.SearchableMs.P50ms, res.SearchableMs.P99ms)
	// A warm-up pass first: the timed passes then append to the same
	// threads (the same seed) with their pages equally warm. The indexer
	// runs meanwhile, as in the service.
	ix := st.NewSearchIndexer(store.SearchIndexerConfig{})
	ix.Start()
	if _, err := measureAppends(ctx, st, opt); err != nil {
		ix.Stop()
		return err
	}
	res.AppendWithMs, err = measureAppends(ctx, st, opt)
	ix.Stop()
	if err != nil {
		return err
	}
	progress("append with the search queue and indexer: p50 %.2f ms, p99 %.2f ms", res.AppendWithMs.P50ms, res.AppendWithMs.P99ms)
	for _, sql := range []string{`DROP TRIGGER checkpoints_search_enqueue ON checkpoints`, `VACUUM ANALYZE checkpoints`} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			return fmt.Errorf("drop the search queue: %w", err)
		}
	}
	if res.AppendWithoutMs, err = measureAppends(ctx, st, opt); err != nil {
		return err
	}
	progress("append without search: p50 %.2f ms, p99 %.2f ms", res.AppendWithoutMs.P50ms, res.AppendWithoutMs.P99ms)
	res.AppendAddedMedianMs = bench.Round(res.AppendWithMs.P50ms-res.AppendWithoutMs.P50ms, 3)
	return nil
}

// sizes reads the indexes' and the column's sizes per checkpoint.
func sizes(ctx context.Context, pool *pgxpool.Pool, res *Result) error {
	var gin, trgm, side int64
	var tsv, text float64
	err := pool.QueryRow(ctx, `SELECT count(*), pg_relation_size('checkpoint_search_tsv'), pg_relation_size('checkpoint_search_code'),
		pg_total_relation_size('checkpoint_search'), (SELECT avg(pg_column_size(tsv)) FROM checkpoint_search),
		avg(octet_length(checkpoint_search_text(content))) FROM checkpoints`).
		Scan(&res.Messages, &gin, &trgm, &side, &tsv, &text)
	if err != nil {
		return fmt.Errorf("sizes: %w", err)
	}
	n := float64(max(res.Messages, 1))
	res.GINBytesPerMsg = bench.Round(float64(gin)/n, 1)
	res.TrgmBytesPerMsg = bench.Round(float64(trgm)/n, 1)
	res.IndexBytesPerMsg = bench.Round(float64(gin+trgm)/n, 1)
	res.SideBytesPerMsg = bench.Round(float64(side)/n, 1)
	res.TsvBytesPerMsg = bench.Round(tsv, 1)
	res.TextBytesPerMsg = bench.Round(text, 1)
	return nil
}

// kind is one kind of query: its name and how to draw one.
type kind struct {
	name string
	draw func(r *rand.Rand) string
}

func measureSearch(ctx context.Context, st *store.Store, opt options, k kind) (Latency, error) {
	r := rand.New(rand.NewPCG(1, uint64(len(k.name))))
	var ds []float64
	hits := 0
	for range opt.queries {
		q := thread.SearchQuery{Text: k.draw(r), Limit: 21}
		caller := fmt.Sprintf("caller_%d", r.IntN(opt.callers))
		t := time.Now()
		h, err := st.MessageSearch(ctx, caller, q)
		if err != nil {
			return Latency{}, fmt.Errorf("%q: %w", q.Text, err)
		}
		ds = append(ds, msSince(t))
		hits += len(h)
	}
	l := latency(ds)
	l.MeanHits = bench.Round(float64(hits)/float64(len(ds)), 1)
	return l, nil
}

// measureAppends writes opt.appends turns (a user and an assistant
// checkpoint, one transaction) onto random corpus threads, each under
// the thread's last checkpoint.
func measureAppends(ctx context.Context, st *store.Store, opt options) (Latency, error) {
	r := rand.New(rand.NewPCG(2, 2))
	c := newCorpus(opt)
	var ds []float64
	for i := range opt.appends {
		ti := r.IntN(opt.threads)
		th := threadID(ti)
		parent, err := lastCheckpoint(ctx, st, th)
		if err != nil {
			return Latency{}, err
		}
		u := &checkpoint.Node{ID: uuid.New(), ParentID: parent, Role: checkpoint.RoleUser,
			Content: []checkpoint.Part{{Type: "text", Text: c.prose(r, 30)}}}
		a := &checkpoint.Node{ID: uuid.New(), ParentID: u.ID, Role: checkpoint.RoleAssistant, Status: &checkpoint.Status{Type: "complete", Reason: "stop"},
			Content: []checkpoint.Part{{Type: "text", Text: c.prose(r, 60) + " func " + c.ident(i) + "() {}"}}}
		t := time.Now()
		if err := st.CheckpointAppend(ctx, th, u, a); err != nil {
			return Latency{}, err
		}
		ds = append(ds, msSince(t))
	}
	return latency(ds), nil
}

// indexPoll is the indexer's poll in measureSearchable: the service's default.
const indexPoll = 200 * time.Millisecond

// measureSearchable appends opt.appends/10 (at least 3) turns, one at a
// time, with an indexer running, and times each from its commit to the
// end of the indexer's batch that indexed it.
func measureSearchable(ctx context.Context, st *store.Store, opt options) (Latency, error) {
	indexed := make(chan struct{}, 1)
	ix := st.NewSearchIndexer(store.SearchIndexerConfig{Poll: indexPoll, OnBatch: func(n int) {
		if n > 0 {
			select {
			case indexed <- struct{}{}:
			default:
			}
		}
	}})
	ix.Start()
	defer ix.Stop()
	r := rand.New(rand.NewPCG(3, 3))
	c := newCorpus(opt)
	var ds []float64
	for range max(3, opt.appends/10) {
		th := threadID(r.IntN(opt.threads))
		parent, err := lastCheckpoint(ctx, st, th)
		if err != nil {
			return Latency{}, err
		}
		u := &checkpoint.Node{ID: uuid.New(), ParentID: parent, Role: checkpoint.RoleUser,
			Content: []checkpoint.Part{{Type: "text", Text: c.prose(r, 30)}}}
		// A commit comes at any moment of the indexer's poll, not just
		// after the last batch.
		time.Sleep(time.Duration(r.Int64N(int64(indexPoll))))
		if err := st.CheckpointAppend(ctx, th, u); err != nil {
			return Latency{}, err
		}
		t := time.Now()
		select {
		case <-indexed:
		case <-time.After(time.Minute):
			return Latency{}, errors.New("a turn was not indexed within a minute")
		case <-ctx.Done():
			return Latency{}, ctx.Err()
		}
		ds = append(ds, msSince(t))
	}
	return latency(ds), nil
}

func lastCheckpoint(ctx context.Context, st *store.Store, th uuid.UUID) (uuid.UUID, error) {
	nodes, err := st.CheckpointsAfter(ctx, th, 0)
	if err != nil || len(nodes) == 0 {
		return uuid.Nil, fmt.Errorf("thread %s: %d checkpoints, %v", th, len(nodes), err)
	}
	return nodes[len(nodes)-1].ID, nil
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Nanoseconds()) / 1e6 }

func latency(ds []float64) Latency {
	s := slices.Clone(ds)
	slices.Sort(s)
	pick := func(p float64) float64 { return bench.Round(s[min(len(s)-1, int(p*float64(len(s))))], 3) }
	return Latency{Queries: len(s), P50ms: pick(0.5), P99ms: pick(0.99), MaxMs: bench.Round(s[len(s)-1], 3)}
}

// threadID is the corpus's id of thread i, as the load's SQL makes it
// (md5('t' || i)::uuid).
func threadID(i int) uuid.UUID {
	return uuid.UUID(md5.Sum([]byte(fmt.Sprintf("t%d", i))))
}
