package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

// TestBenchPeerSmall runs the whole peer bench on small sizes against the
// test Postgres and checks the result's shape, never its speed.
func TestBenchPeerSmall(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.New(t) // any database on the server: the bench creates its own
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout bytes.Buffer
	stderr := &peerSyncBuffer{} // the bench's progress and its service's log share it
	args := []string{"--database-url", dbURL, "--n", "3,4", "--reps", "2", "--fresh-turns", "3",
		"--warmup-turns", "1", "--tokens-per-s-run", "500", "--end-turns", "2"}
	if err := Run(ctx, args, func(string) string { return "" }, &stdout, stderr); err != nil {
		t.Fatalf("bench peer: got error %v, want none; stderr:\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	last := lines[len(lines)-1]
	var res map[string]any
	if err := json.Unmarshal([]byte(last), &res); err != nil {
		t.Fatalf("last stdout line: got %q, want one JSON object (%v)", last, err)
	}

	wantPositive(t, "", res, "turn_ms", "http_turn_ms", "tokens_per_s", "http_tokens_per_s", "row_bytes_per_turn", "commit_ms")
	wantNumber(t, "", res, "bytes_per_turn")
	checkPeerByN(t, res, "3", "4")
	checkPeerAbout(t, res)
	if !strings.Contains(stderr.String(), "fresh thread, in-process") || !strings.Contains(stderr.String(), "N=4: turn_end_ms") {
		t.Errorf("stderr: got %q, want one progress line per phase", stderr.String())
	}
	name, _ := res["database"].(string)
	checkPeerDatabaseDropped(ctx, t, dbURL, name)
}

// wantPositive checks that every key of m is a number above zero; where
// prefixes the key in failures.
func wantPositive(t *testing.T, where string, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		v, ok := m[k].(float64)
		if !ok {
			t.Errorf("%s%s: got %v (%T), want a number", where, k, m[k], m[k])
		} else if v <= 0 {
			t.Errorf("%s%s: got %v, want > 0", where, k, v)
		}
	}
}

// wantNumber checks that every key of m is a number. Size growth is
// counted in whole pages, and autovacuum may truncate a table within a
// window, so a small window can grow by zero or even shrink: sizes must be
// numbers, not positive.
func wantNumber(t *testing.T, where string, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k].(float64); !ok {
			t.Errorf("%s%s: got %v (%T), want a number", where, k, m[k], m[k])
		}
	}
}

// checkPeerByN checks the result's by_n: an entry for each of ns, no
// other, each with its figures and persisted flags.
func checkPeerByN(t *testing.T, res map[string]any, ns ...string) {
	t.Helper()
	byN, ok := res["by_n"].(map[string]any)
	if !ok {
		t.Fatalf("by_n: got %v, want an object", res["by_n"])
	}
	for _, n := range ns {
		nr, ok := byN[n].(map[string]any)
		if !ok {
			t.Errorf("by_n.%s: got %v, want an object", n, byN[n])
			continue
		}
		where := "by_n." + n + "."
		wantPositive(t, where, nr, "get_state_ms", "history_ms", "fork_ms", "edit_ms", "turn_end_ms", "thread_row_bytes", "commit_ms")
		wantNumber(t, where, nr, "thread_stored_bytes", "bytes_per_turn_end")
		for _, k := range []string{"fork_persisted_ok", "edit_persisted_ok"} {
			if nr[k] != true {
				t.Errorf("%s%s: got %v, want true (problems: %v)", where, k, nr[k], nr["persist_problems"])
			}
		}
	}
	if len(byN) != len(ns) {
		t.Errorf("by_n: got %d entries, want %d (N = %v)", len(byN), len(ns), ns)
	}
}

// checkPeerAbout checks what the result says about the machine, the
// server, the build and the peer's figures.
func checkPeerAbout(t *testing.T, res map[string]any) {
	t.Helper()
	machine, _ := res["machine"].(map[string]any)
	if machine == nil || machine["cpu"] == "" || machine["cores"] == nil || machine["memory_mb"] == nil {
		t.Errorf("machine: got %v, want cpu, cores and memory_mb", res["machine"])
	}
	for _, k := range []string{"postgres", "go_version", "commit", "database"} {
		if s, _ := res[k].(string); s == "" {
			t.Errorf("%s: got %v, want a non-empty string", k, res[k])
		}
	}
	if s, _ := res["postgres"].(string); !strings.Contains(s, "PostgreSQL") {
		t.Errorf("postgres: got %q, want the server's version()", s)
	}
	peer, _ := res["peer"].(map[string]any)
	if peer == nil || peer["turn_ms"] != 12.2 || peer["ratio"] == nil {
		t.Errorf("peer: got %v, want the peer's figures with ratios", res["peer"])
	}
	if ratio, _ := peer["ratio"].(map[string]any); ratio != nil {
		wantPositive(t, "peer.ratio.", ratio, "turn_ms", "tokens_per_s", "http_tokens_per_s")
	}
}

// checkPeerDatabaseDropped checks that the bench's database, name, is gone
// from the server of dbURL.
func checkPeerDatabaseDropped(ctx context.Context, t *testing.T, dbURL, name string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	var count int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, name).Scan(&count); err != nil {
		t.Fatalf("look for database %s: %v", name, err)
	}
	if count != 0 || !strings.HasPrefix(name, "tl_bench_") {
		t.Errorf("database %q after the bench: got %d such databases, want a tl_bench_ database that was dropped (0)", name, count)
	}
}

// peerSyncBuffer is a bytes.Buffer safe for one writer and one reader.
type peerSyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *peerSyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *peerSyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBenchPeerDropsDatabaseOnCancel checks that a bench interrupted
// midway (Ctrl-C cancels its context) still drops its database.
func TestBenchPeerDropsDatabaseOnCancel(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stdout bytes.Buffer
	stderr := &peerSyncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"--database-url", dbURL, "--n", "50", "--reps", "1", "--fresh-turns", "200",
			"--warmup-turns", "0"}, func(string) string { return "" }, &stdout, stderr)
	}()
	// Cancel once the database exists and turns are running.
	var err error
	wait.Eventually(t, time.Minute, func() bool { return strings.Contains(stderr.String(), "created") },
		"bench peer: no database created within a minute; stderr: %s", func() any { return stderr.String() })
	time.Sleep(200 * time.Millisecond)
	cancel()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("bench peer: still running a minute after cancel, want it to stop")
	}
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Errorf("bench peer after cancel: got %v, want an error wrapping context.Canceled", err)
	}
	s := stderr.String()
	i := strings.Index(s, "database tl_bench_")
	if i < 0 {
		t.Fatalf("stderr: got %q, want the database's name", s)
	}
	name := strings.Fields(s[i+len("database "):])[0]
	if !strings.Contains(s, "database "+name+" dropped") {
		t.Errorf("stderr: got %q, want %q", s, "database "+name+" dropped")
	}
	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	defer ccancel()
	conn, err := pgx.Connect(cctx, dbURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(cctx)
	var count int
	if err := conn.QueryRow(cctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, name).Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count != 0 {
		t.Errorf("database %s after a cancelled bench: got %d, want 0 (dropped)", name, count)
	}
}

func TestBenchPeerFlags(t *testing.T) {
	t.Parallel()
	env := func(string) string { return "" }
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), []string{"--help"}, env, &stdout, &stderr); err != nil {
		t.Errorf("bench peer --help: got error %v, want none", err)
	}
	for _, f := range []string{"-database-url", "-n ", "-reps", "-fresh-turns", "-warmup-turns", "-tokens-per-s-run", "-end-turns"} {
		if !strings.Contains(stdout.String(), f) {
			t.Errorf("bench peer --help: got %q, want it to list %s", stdout.String(), f)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "not defined: -bogus"},
		{[]string{"--n", "10,x"}, `--n: "x"`},
		{[]string{"--n", ""}, "--n needs"},
		{[]string{"--reps", "0"}, "--reps must be between 1 and 1000, got 0"},
		{[]string{"--fresh-turns", "-1"}, "--fresh-turns"},
		{[]string{"extra"}, "takes no arguments"},
	} {
		stderr.Reset()
		err := Run(context.Background(), tc.args, env, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, flag.ErrHelp) {
			t.Errorf("bench peer %v: got error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

// TestComparePeerExact: a target is met on the exact ratio, not on the
// rounded one the JSON shows.
func TestComparePeerExact(t *testing.T) {
	t.Parallel()
	cases := []struct {
		turnMS, forkMS float64
		want           bool
	}{
		{1.22, 0.71, true},    // exactly 10x
		{1.225, 0.715, false}, // 9.96x and 9.93x, shown as 10.0 and 9.9
	}
	for _, c := range cases {
		res := &Result{TurnMS: c.turnMS, BytesPerTurn: 1, TokensPerS: 1e6,
			ByN: map[string]*NResult{"10": {ForkMS: c.forkMS}}}
		peer, targets := comparePeer(res, []int{10})
		if got := targets["turn_ms_10x"]; got != c.want {
			t.Errorf("turn_ms %.3f: turn_ms_10x = %v, want %v", c.turnMS, got, c.want)
		}
		if got := targets["fork_ms_10x_n10"]; got != c.want {
			t.Errorf("fork_ms %.3f: fork_ms_10x_n10 = %v, want %v", c.forkMS, got, c.want)
		}
		if r := peer["ratio"].(map[string]any)["turn_ms"].(float64); r != 10 {
			t.Errorf("turn_ms %.3f: shown ratio %v, want 10 (rounded to one decimal)", c.turnMS, r)
		}
	}
}

// setupPeerBench opens the bench's service on a database of its own, as
// bench peer does before its workload.
func setupPeerBench(t *testing.T) (context.Context, *peerBench) {
	t.Helper()
	dbURL := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	b := &peerBench{stderr: &peerSyncBuffer{}}
	t.Cleanup(b.close)
	if err := b.open(ctx, dbURL); err != nil {
		t.Fatalf("open: got %v, want nil", err)
	}
	return ctx, b
}

// TestBenchPeerStartsOnSettledTables: once the bench has opened its
// service, Threadline's tables hold no page: the rows the store's
// connection warm-ups wrote and rolled back, and any pages Postgres added
// at once while those warm-ups contended, are gone, so bytes_per_turn
// counts what the turns add.
func TestBenchPeerStartsOnSettledTables(t *testing.T) {
	t.Parallel()
	ctx, b := setupPeerBench(t)
	var tables int
	var nonEmpty string
	err := b.pgStats.QueryRow(ctx, `SELECT count(*),
		coalesce(string_agg(c.relname || ' ' || pg_relation_size(c.oid) || ' B', ', ') FILTER (WHERE pg_relation_size(c.oid) > 0), '')
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname NOT IN ('schema_migrations', 'run_fence')`).Scan(&tables, &nonEmpty)
	if err != nil {
		t.Fatal(err)
	}
	if tables < 4 {
		t.Fatalf("tables: got %d, want Threadline's (threads, checkpoints, runs, run_events, ...)", tables)
	}
	// schema_migrations and run_fence hold one row each from the start.
	if nonEmpty != "" {
		t.Errorf("heaps after open: got %s, want every one empty (the warm-ups' rolled-back rows vacuumed away)", nonEmpty)
	}
}

// TestBenchPeerVerify: the persisted check passes a run as it was written
// and names what differs when the head, the parent or the text does not
// match.
func TestBenchPeerVerify(t *testing.T) {
	t.Parallel()
	ctx, b := setupPeerBench(t)
	threadID := uuid.New()
	prompt := "a question of exactly the kind the bench sends"
	r, err := b.runInProc(ctx, threadID, thread.RunRequest{
		Message: &thread.UserMessage{Content: []checkpoint.Part{{Type: "text", Text: prompt}}}})
	if err != nil {
		t.Fatalf("run: got %v, want nil", err)
	}
	th, err := b.st.ThreadGet(ctx, peerCaller, threadID)
	if err != nil {
		t.Fatal(err)
	}
	user := r.run.UserMessageID
	if got := b.verify(ctx, threadID, r, user, prompt, nil, th.HeadID); got != "" {
		t.Fatalf("verify of the run as written: got %q, want no problem", got)
	}
	altered := r
	altered.text += " x"
	for _, tc := range []struct {
		name   string
		r      runResult
		parent uuid.UUID
		head   uuid.UUID
		want   string
	}{
		{"another head", r, user, uuid.New(), "head of its branch"},
		{"another parent", r, uuid.New(), th.HeadID, "parent"},
		{"other text", altered, user, th.HeadID, "text"},
	} {
		if got := b.verify(ctx, threadID, tc.r, tc.parent, prompt, nil, tc.head); !strings.Contains(got, tc.want) {
			t.Errorf("verify with %s: got %q, want a problem naming %q", tc.name, got, tc.want)
		}
	}
}
