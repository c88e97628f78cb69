package load

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/threadline/threadline/model/builtin"
	"github.com/threadline/threadline/store/pgtest"
)

// binaries builds the two commands a bench load child runs, once per test
// binary: the service (threadline serve) and this command (threadline-bench
// floor).
var binaries = sync.OnceValues(func() (map[string]string, error) {
	dir, err := os.MkdirTemp("", "threadline-bench-bin")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, name := range []string{"threadline", "threadline-bench"} {
		p := filepath.Join(dir, name)
		b, err := exec.Command("go", "build", "-o", p, "github.com/threadline/threadline/cmd/"+name).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("go build %s: %v\n%s", name, err, b)
		}
		out[name] = p
	}
	return out, nil
})

// binary is the path of the built command name.
func binary(t *testing.T, name string) string {
	t.Helper()
	bins, err := binaries()
	if err != nil {
		t.Fatal(err)
	}
	return bins[name]
}

// TestBenchLoadSmall runs `bench load` for real on a small size: a child
// service on loopback, a fresh database, clients that drop and rejoin. It
// checks the report's shape and correctness figures, never its speed.
func TestBenchLoadSmall(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a service and Postgres databases")
	}
	db := pgtest.New(t) // the bench creates (and drops) its own database beside it
	bin := binary(t, "threadline")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"--k", "5", "--tokens", "20", "--rate", "200", "--rejoin-share", "0.4", "--ramp", "200ms",
		"--rejoin-pause", "30ms", "--timeout", "2m", "--database-url", db, "--server-bin", bin,
		"--with-floor", "--floor-bin", binary(t, "threadline-bench"),
		// Runs that hold tokens a little (engine.Config.TokenHold) still
		// deliver each exactly once, rejoins included.
		"--server-env", "THREADLINE_TOKEN_HOLD=20ms"}
	getenv := func(string) string { return "" }
	if err := Run(ctx, args, getenv, &stdout, &stderr); err != nil {
		t.Fatalf("bench load: %v\nstderr:\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if got, want := len(lines), 3; got != want {
		t.Fatalf("stdout has %d lines, want %d (Threadline and the floor per K, then the summary):\n%s", got, want, stdout.String())
	}
	checkLoadKeys(t, lines[0])
	var r Result
	if err := json.Unmarshal([]byte(lines[0]), &r); err != nil {
		t.Fatal(err)
	}
	checkLoadRuns(t, &r)
	checkLoadDelays(t, &r)
	checkLoadServer(t, &r)
	if w := r.ServerWritesPerToken; w == nil || *w <= 0 {
		t.Errorf("server_write_syscalls_per_token = %v, want a positive figure", w)
	}
	if !strings.Contains(r.Target, "THREADLINE_TOKEN_HOLD=20ms") {
		t.Errorf("target %q does not name the service's extra environment", r.Target)
	}
	for what, v := range map[string]*float64{"server_cpu_us_per_token": r.ServerCPUPerToken, "db_cpu_us_per_token": r.DBCPUPerToken} {
		if v == nil || *v <= 0 {
			t.Errorf("%s = %v, want a positive figure", what, v)
		}
	}
	var floor Result
	if err := json.Unmarshal([]byte(lines[1]), &floor); err != nil {
		t.Fatal(err)
	}
	if floor.K != 5 || !strings.Contains(floor.Target, "floor") || floor.RunsCompleted != 5 || floor.DBCPUPerToken != nil {
		t.Errorf("the floor's line: k %d target %q completed %d db cpu %v; want K=5's floor, complete, without a database", floor.K, floor.Target, floor.RunsCompleted, floor.DBCPUPerToken)
	}
	var sum Summary
	if err := json.Unmarshal([]byte(lines[2]), &sum); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, lines[2])
	}
	if !sum.Summary || len(sum.Results) != 1 || sum.Results[0].K != 5 || len(sum.FloorResults) != 1 {
		t.Errorf("summary = %+v, want summary true with the one K=5 result and its floor", sum)
	}
	if !strings.Contains(stderr.String(), "k=5") {
		t.Errorf("stderr has no progress for k=5:\n%s", stderr.String())
	}
}

// checkLoadKeys checks that a result line is a JSON object holding every
// figure of the report.
func checkLoadKeys(t *testing.T, line string) {
	t.Helper()
	var res map[string]any
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		t.Fatalf("first line is not JSON: %v\n%s", err, line)
	}
	for _, key := range []string{"k", "runs_completed", "runs_failed", "tokens_expected", "tokens_delivered", "exactly_once",
		"rejoined", "added_delay_ms", "added_delay_upper_bound_ms", "added_delay_all_streaming_ms", "added_delay_by_second", "added_delay_before_first_event_ms", "added_delay_after_first_event_ms", "server_publish_delay", "server_sched_latency", "preconnected_conns", "delay_method", "server_cpu_s",
		"server_write_syscalls_per_token", "server_cpu_util", "server_rss_peak_mb", "db_growth_bytes", "wall_s", "machine", "commit", "ramp"} {
		if _, ok := res[key]; !ok {
			t.Errorf("result has no %q key: %s", key, line)
		}
	}
	for _, key := range []string{"p50", "p99", "max"} {
		d, _ := res["added_delay_ms"].(map[string]any)
		if _, ok := d[key]; !ok {
			t.Errorf("added_delay_ms has no %q: %v", key, res["added_delay_ms"])
		}
	}
}

// checkLoadRuns checks TestBenchLoadSmall's runs: five, all complete, each
// token delivered exactly once, two of them rejoined.
func checkLoadRuns(t *testing.T, r *Result) {
	t.Helper()
	if got, want := r.K, 5; got != want {
		t.Errorf("k = %d, want %d", got, want)
	}
	if got, want := r.RunsFailed, 0; got != want {
		t.Errorf("runs_failed = %d, want %d; errors: %v", got, want, r.Errors)
	}
	if got, want := r.RunsCompleted, 5; got != want {
		t.Errorf("runs_completed = %d, want %d", got, want)
	}
	if got, want := r.TokensDelivered, r.TokensExpected; got != want || want != 100 {
		t.Errorf("tokens_delivered = %d, want tokens_expected = %d (= 100)", got, want)
	}
	if !r.ExactlyOnce {
		t.Errorf("exactly_once = false, want true; errors: %v", r.Errors)
	}
	if got, want := r.Rejoined, 2; got != want {
		t.Errorf("rejoined = %d, want %d (0.4 of 5)", got, want)
	}
}

// checkLoadDelays checks that the added delay's samples add up across its
// breakdowns, and that the clients preconnected and the service's
// scheduler latencies were read.
func checkLoadDelays(t *testing.T, r *Result) {
	t.Helper()
	if r.AddedDelayMS.Samples == 0 {
		t.Errorf("added_delay_ms has no samples, want some")
	}
	n := 0
	for _, sec := range r.BySecond {
		n += sec.Samples
	}
	if n != r.AddedDelayMS.Samples {
		t.Errorf("added_delay_by_second holds %d samples, want added_delay_ms's %d", n, r.AddedDelayMS.Samples)
	}
	if got, want := r.BeforeFirstMS.Samples+r.AfterFirstMS.Samples, r.AddedDelayMS.Samples; got != want {
		t.Errorf("before + after the first event hold %d samples, want added_delay_ms's %d", got, want)
	}
	if r.Preconnected < r.K {
		t.Errorf("preconnected_conns = %d, want at least k = %d (one keep-alive connection per client)", r.Preconnected, r.K)
	}
	if r.ServerSched == nil || r.ServerSched.Samples == 0 || r.ServerSched.P50LeMS == nil {
		t.Errorf("server_sched_latency = %+v, want the service's scheduler latencies over the window", r.ServerSched)
	}
}

// checkLoadServer checks the child service's resource figures.
func checkLoadServer(t *testing.T, r *Result) {
	t.Helper()
	if r.ServerCPUS == nil || r.ServerRSSPeakMB == nil || r.DBGrowthBytes == nil {
		t.Errorf("server_cpu_s, server_rss_peak_mb, db_growth_bytes = %v, %v, %v; want numbers for a child service",
			r.ServerCPUS, r.ServerRSSPeakMB, r.DBGrowthBytes)
	}
	// Five short runs may fit in pages the service's connection warm-ups
	// already extended, so the growth can be zero, never negative.
	if r.DBGrowthBytes != nil && *r.DBGrowthBytes < 0 {
		t.Errorf("db_growth_bytes = %d, want >= 0", *r.DBGrowthBytes)
	}
}

// TestBenchLoadFloor runs `bench load --floor` for real on a small size:
// the in-memory floor as a child, clients that drop and rejoin. No
// database is involved, so the database figures are absent.
func TestBenchLoadFloor(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a child process")
	}
	bin := binary(t, "threadline-bench")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"--floor", "--k", "6", "--tokens", "30", "--rate", "300", "--rejoin-share", "0.5", "--ramp", "100ms",
		"--rejoin-pause", "20ms", "--timeout", "1m", "--server-bin", bin}
	if err := Run(ctx, args, func(string) string { return "" }, &stdout, &stderr); err != nil {
		t.Fatalf("bench load --floor: %v\nstderr:\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var r Result
	if err := json.Unmarshal([]byte(lines[0]), &r); err != nil {
		t.Fatalf("first line: %v\n%s", err, lines[0])
	}
	if r.RunsCompleted != 6 || r.RunsFailed != 0 || !r.ExactlyOnce || r.TokensDelivered != 180 {
		t.Errorf("completed, failed, exactly_once, delivered = %d, %d, %v, %d; want 6, 0, true, 180; errors: %v",
			r.RunsCompleted, r.RunsFailed, r.ExactlyOnce, r.TokensDelivered, r.Errors)
	}
	if got, want := r.Rejoined, 3; got != want {
		t.Errorf("rejoined = %d, want %d", got, want)
	}
	if !strings.Contains(r.Target, "threadline-bench floor") {
		t.Errorf("target = %q, want it to name threadline-bench floor", r.Target)
	}
	if r.DBGrowthBytes != nil || r.DBBackendCPUS != nil {
		t.Errorf("db_growth_bytes, db_backend_cpu_s = %v, %v; want none for the floor", r.DBGrowthBytes, r.DBBackendCPUS)
	}
}

func TestBenchLoadFlags(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string // part of the error; "" for none
	}{
		{[]string{"--k", "1,2"}, ""},
		{[]string{"--k", "0"}, "between 1 and"},
		{[]string{"--k", "99999"}, "between 1 and"},
		{[]string{"--url", "http://10.1.2.3:8080"}, "loopback only"},
		{[]string{"--url", "http://example.com"}, "loopback only"},
		{[]string{"--url", "http://127.0.0.1:8080/"}, ""},
		{[]string{"--server-pid", "12"}, "goes with --url"},
		{[]string{"--rate", "0"}, "--rate"},
		{[]string{"--rejoin-share", "1.5"}, "--rejoin-share"},
		{[]string{"--tokens", "2"}, "at least 3"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"--with-floor", "--floor"}, "does not go with --floor"},
		{[]string{"--with-floor", "--url", "http://127.0.0.1:8080"}, "do not go with --url"},
		{[]string{"--server-env", "THREADLINE_TOKEN_HOLD=20ms", "--server-env", "GOGC=200"}, ""},
		{[]string{"--server-env", "GOGC"}, "not KEY=VALUE"},
		{[]string{"--server-env", "=1"}, "not KEY=VALUE"},
	}
	for _, tc := range cases {
		var stderr bytes.Buffer
		_, err := parseLoadOpts(tc.args, func(string) string { return "" }, &stderr)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("parseLoadOpts(%q) = %v, want no error", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("parseLoadOpts(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// TestLoadP99PassesAt: the first K whose p99 reached the goal's bound, in
// the order run; none when every p99 stayed under it or had no samples.
func TestLoadP99PassesAt(t *testing.T) {
	t.Parallel()
	res := func(k int, p99 float64, n int) Result {
		return Result{K: k, AddedDelayMS: loadDist{P99: p99, Samples: n}}
	}
	for _, tc := range []struct {
		rs   []Result
		want int // 0: none
	}{
		{[]Result{res(100, 3, 10), res(500, 49.9, 10)}, 0},
		{[]Result{res(100, 3, 10), res(500, 50, 10), res(1000, 80, 10)}, 500},
		{[]Result{res(100, 0, 0), res(500, 60, 10)}, 500},
		{nil, 0},
	} {
		got := loadP99PassesAt(tc.rs)
		if (got == nil) != (tc.want == 0) || (got != nil && *got != tc.want) {
			t.Errorf("loadP99PassesAt(%+v) = %v, want %d", tc.rs, got, tc.want)
		}
	}
}

func TestLoadHistogram(t *testing.T) {
	t.Parallel()
	name := "h"
	before := map[string]float64{`h_bucket{le="0.001"}`: 1, `h_bucket{le="0.01"}`: 1, `h_bucket{le="+Inf"}`: 1, "h_count": 1, "h_sum": 0.0005, "tok": 1}
	after := map[string]float64{`h_bucket{le="0.001"}`: 51, `h_bucket{le="0.01"}`: 100, `h_bucket{le="+Inf"}`: 101, "h_count": 101, "h_sum": 0.2005, "tok": 301}
	d := loadHistogram(before, after, name, "tok")
	if d == nil || d.P50LeMS == nil || d.P99LeMS == nil || d.MeanMS == nil {
		t.Fatalf("loadHistogram = %+v, want quantiles", d)
	}
	if got, want := *d.P50LeMS, 1.0; got != want {
		t.Errorf("p50 bound = %v ms, want %v", got, want)
	}
	if got, want := *d.P99LeMS, 10.0; got != want {
		t.Errorf("p99 bound = %v ms, want %v", got, want)
	}
	if got, want := *d.MeanMS, 2.0; got != want {
		t.Errorf("mean = %v ms, want %v", got, want)
	}
	if got, want := d.Tokens, int64(300); got != want {
		t.Errorf("tokens = %d, want %d", got, want)
	}
	p := loadPercentiles([]float64{5, 1, 4, 2, 3})
	if got, want := p, (loadDist{P50: 3, P99: 5, Max: 5, Samples: 5}); got != want {
		t.Errorf("loadPercentiles = %+v, want %+v", got, want)
	}
}

// TestLoadDecodeMatchesJSON: the load generator's direct path for token
// lines decodes exactly what encoding/json does, and leaves every other
// line (escapes, other layouts, broken lines) to encoding/json.
func TestLoadDecodeMatchesJSON(t *testing.T) {
	t.Parallel()
	const run, msg = "0b20eec5-4e68-4421-9b87-a93e382c3a7c", "c3a16ec1-8051-4d66-adac-9eb269acc215"
	tok := func(seq, text string) string {
		return `{"type":"token","run_id":"` + run + `","sequence":` + seq + `,"message_id":"` + msg + `","text":"` + text + `"}` + "\n"
	}
	for _, tc := range []struct {
		line string
		fast bool
	}{
		{tok("2", " hello"), true},
		{tok("123456", ""), true},
		{tok("7", "日本 é"), true},
		{tok("7", `say \"hi\"`), false},
		{tok("7", `a\nb`), false},
		{tok("7", `\u2028`), false},
		{tok("7", "bad \xff utf-8"), false},
		{tok("7", "tab\there"), false},
		{tok("07", "x"), false},
		{tok("-1", "x"), false},
		{tok("1e3", "x"), false},
		{tok("99999999999999999999", "x"), false},
		{strings.TrimSuffix(tok("2", "x"), "\n") + "\r\n", false},
		{strings.TrimSuffix(tok("2", "x"), "}\n") + "\n", false},
		{`{"type":"token","sequence":2,"run_id":"` + run + `","message_id":"` + msg + `","text":"x"}` + "\n", false},
		{`{"type":"snapshot","run_id":"` + run + `","sequence":1,"run_status":"running"}` + "\n", false},
		{`{"type":"token","run_id":"` + run + `","sequence":2,"message_id":"` + msg + `","text":"x","extra":1}` + "\n", false},
	} {
		var got, want loadEvent
		gotErr := loadDecode([]byte(tc.line), &got)
		wantErr := json.Unmarshal([]byte(tc.line), &want)
		if (gotErr != nil) != (wantErr != nil) || fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
			t.Errorf("%q: got %+v (%v), want %+v (%v)", tc.line, got, gotErr, want, wantErr)
		}
		var fast loadEvent
		if ok := loadFastToken([]byte(tc.line), &fast); ok != tc.fast {
			t.Errorf("%q: direct path taken %v, want %v", tc.line, ok, tc.fast)
		}
	}
}

// TestLoadCheckDelays folds one made-up client whose tokens were read 0, 3
// and 1 ms behind the model's 10 ms schedule into a result, and one client
// that lost a token: the delays, the slip and exactly-once come out as
// worked by hand.
func TestLoadCheckDelays(t *testing.T) {
	t.Parallel()
	const tokens = 3
	sent := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms float64) time.Time { return sent.Add(time.Duration(ms * float64(time.Millisecond))) }
	client := func(idx int, lateMS []float64) *loadClient {
		c := &loadClient{idx: idx, prompt: "check", sent: sent, firstAt: at(5), final: "succeeded", finalSet: true,
			arrivals: make([]time.Time, tokens+2), conns: make([]int8, tokens+2), connSent: []time.Time{sent}}
		want := builtin.BuiltinText(c.prompt, 1, tokens)
		for i, late := range lateMS {
			s := i + 2
			c.arrivals[s] = at(5 + float64(s-1)*10 + late)
			c.text.WriteString(want[i*5 : i*5+5])
			c.tokens++
			c.lastSeq = int64(s)
		}
		c.lastSeq++ // the final snapshot
		c.finalTxt = want
		return c
	}
	var res Result
	loadCheck(&res, []*loadClient{client(0, []float64{0, 3, 1})}, loadOpts{tokens: tokens}, 10*time.Millisecond)
	if !res.ExactlyOnce || res.RunsCompleted != 1 || res.TokensDelivered != tokens {
		t.Errorf("exactly_once, completed, delivered = %v, %d, %d; want true, 1, %d; errors %v", res.ExactlyOnce, res.RunsCompleted, res.TokensDelivered, tokens, res.Errors)
	}
	if got, want := res.AddedDelayMS, (loadDist{P50: 1, P99: 3, Max: 3, Samples: 3}); got != want {
		t.Errorf("added_delay_ms = %+v, want %+v", got, want)
	}
	if got, want := res.SlipFreeMS, (loadDist{P50: 0, P99: 2, Max: 2, Samples: 3}); got != want {
		t.Errorf("added_delay_slip_free_ms = %+v, want %+v", got, want)
	}
	if got, want := res.ModelSlipMS, (loadDist{P50: 1, P99: 1, Max: 1, Samples: 1}); got != want {
		t.Errorf("model_slip_ms = %+v, want %+v", got, want)
	}

	lost := client(1, []float64{0, 3})
	lost.text.WriteString(" lost") // the final snapshot's text, but one token never read
	res = Result{}
	loadCheck(&res, []*loadClient{lost}, loadOpts{tokens: tokens}, 10*time.Millisecond)
	if res.ExactlyOnce || res.Mismatches == 0 {
		t.Errorf("exactly_once, mismatches = %v, %d for a lost token; want false, > 0", res.ExactlyOnce, res.Mismatches)
	}
}
