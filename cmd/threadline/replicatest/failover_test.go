package replicatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

// Failover: the replicas on a Postgres primary with a synchronous standby
// and automatic failover (deploy/failover.sh, pg_auto_failover), connected
// through a multi-host URL with target_session_attrs=read-write. The
// primary's whole node is killed (its keeper and its Postgres, kill -9)
// under streaming runs on two replicas.

// failover runs the failover tests and benchmark against the cluster of
// deploy/failover.sh, which must be started (make test-failover does).
var failover = flag.Bool("replica.failover", false, "run TestFailover and BenchmarkFailover against deploy/failover.sh's cluster (make test-failover starts it)")

// failoverBound bounds the wait for new runs after the primary's death.
const failoverBound = 90 * time.Second

// failoverSh runs deploy/failover.sh with args and returns its stdout.
func failoverSh(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("../../../deploy/failover.sh", args...).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("deploy/failover.sh %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return strings.TrimSpace(string(out))
}

// failoverDB creates a database of its own on the failover cluster and
// returns its multi-host URL; the database is dropped when the test ends.
func failoverDB(t testing.TB) string {
	t.Helper()
	if !*failover {
		t.Skip("needs deploy/failover.sh's cluster: make test-failover (-args -replica.failover)")
	}
	base := failoverSh(t, "url")
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "tl_failover_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to the failover cluster: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	onEveryNode(t, base, name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, base); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = c.Close(ctx)
		}
	})
	return pgtest.WithDatabase(base, name)
}

// onEveryNode waits until database name can be opened on every host of
// the multi-host URL base: the standby replays the CREATE DATABASE after
// the primary's commit returns, and a replica whose first host is a
// standby without it is refused there (pgx tries no other host after a
// server's refusal).
func onEveryNode(t testing.TB, base, name string) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range strings.Split(u.Host, ",") {
		one := *u
		one.Host, one.Path = host, "/"+name
		q := one.Query()
		q.Del("target_session_attrs")
		one.RawQuery = q.Encode()
		wait.Eventually(t, 30*time.Second, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, err := pgx.Connect(ctx, one.String())
			if err != nil {
				return false
			}
			_ = c.Close(ctx)
			return true
		}, "database %s never appeared on %s", name, host)
	}
}

// killPrimary kills the primary's node and, when the test ends, brings it
// back as a standby and waits for the pair to be in sync again, so the
// next test finds the cluster whole. It returns when the kill was sent.
func killPrimary(t testing.TB) string {
	t.Helper()
	p := failoverSh(t, "primary")
	if p == "" {
		t.Fatalf("deploy/failover.sh names no primary:\n%s", failoverSh(t, "state"))
	}
	t.Cleanup(func() {
		failoverSh(t, "revive", p)
		failoverSh(t, "wait-sync")
	})
	failoverSh(t, "kill", p)
	return p
}

// untilNewRun starts runs on r on new threads until one is accepted (200)
// and ends succeeded, for at most failoverBound, and returns when it was
// accepted.
func untilNewRun(t testing.TB, r *replica) time.Time {
	t.Helper()
	var (
		at   time.Time
		code int
		body string
	)
	const failed = "a new run on %s after the failover: %v %v, want 200 (or 503 while it lasts, for at most %v)"
	wait.Eventually(t, failoverBound, func() bool {
		var s *stream
		s, code, body = tryRun(t, r, uuid.NewString(), message("", "after the failover"))
		if s == nil {
			if code != http.StatusServiceUnavailable {
				t.Fatalf(failed, r.name, code, body, failoverBound)
			}
			return false
		}
		at = time.Now()
		evs := s.rest()
		if last := evs[len(evs)-1]; last.RunStatus != "succeeded" {
			t.Fatalf("the first run after the failover on %s ended %s: %s", r.name, last.RunStatus, last.Raw)
		}
		return true
	}, failed, r.name, func() any { return code }, func() any { return body }, failoverBound)
	return at
}

// TestFailover kills the primary's node under streaming runs on two
// replicas, each run followed from the other replica. The standby is
// promoted and the replicas reach it through the multi-host URL: every run
// ends with a final snapshot; every event a client saw was acknowledged
// by the synchronous standby, so the replays on both replicas, read from
// the new primary, equal what the live clients saw, gap-free, and every
// acknowledged user message is kept (faultRun.check); new runs succeed on
// both replicas.
func TestFailover(t *testing.T) {
	db := failoverDB(t)
	env := []string{"THREADLINE_BUILTIN_DELAY=10ms", "THREADLINE_BUILTIN_TOKENS=1500", longLease}
	rs := []*replica{startReplica(t, "replica0", db, env...), startReplica(t, "replica1", db, env...)}
	var runs []*faultRun
	for i := range 4 {
		runs = append(runs, startFaultRun(t, rs[i%2], rs[(i+1)%2], fmt.Sprintf("failover run %d", i), 3))
	}
	killed := killPrimary(t)
	at := time.Now()
	for _, r := range rs {
		untilNewRun(t, r)
	}
	t.Logf("%s killed; new runs accepted on both replicas %v later", killed, time.Since(at).Round(time.Millisecond))
	ended := map[string]int{}
	for _, f := range runs {
		f.wait(t)
		f.check(t, "")
		ended[f.liveEvs[len(f.liveEvs)-1].RunStatus]++
	}
	t.Logf("runs ended: %v", ended)
}

// failovers is how many kills BenchmarkFailover measures.
var failovers = flag.Int("replica.failovers", 5, "kills of the primary that BenchmarkFailover measures")

// BenchmarkFailover measures, for each of -replica.failovers kills, the
// time from kill -9 of the primary's node until a new run is accepted
// again (a run start sent every 100 ms, until the first 200), with a run
// streaming on each of two replicas. Each kill is a sub-benchmark of its
// own, whose cleanups (the replicas stopped, the node revived and in sync
// again) run before the next, outside the timing.
//
//	make build && deploy/failover.sh start
//	go test -run '^$' -bench BenchmarkFailover -benchtime 1x ./cmd/threadline/replicatest/ -args -replica.failover
func BenchmarkFailover(b *testing.B) {
	var ds []time.Duration
	for i := range *failovers {
		b.Run(fmt.Sprintf("kill%d", i+1), func(b *testing.B) {
			d := failoverOnce(b)
			ds = append(ds, d)
			b.ReportMetric(ms(d), "new_runs_ms")
		})
	}
	if len(ds) > 0 {
		b.Logf("kill -9 of the primary to new runs accepted, %d kills: p50 %.0f ms, max %.0f ms", len(ds), ms(pct(ds, 50)), ms(pct(ds, 100)))
	}
}

// failoverOnce kills the primary under streaming runs and returns how long
// new runs were refused.
func failoverOnce(b *testing.B) time.Duration {
	db := failoverDB(b)
	env := []string{"THREADLINE_BUILTIN_DELAY=10ms", "THREADLINE_BUILTIN_TOKENS=1500", longLease}
	r := startReplica(b, "replica0", db, env...)
	other := startReplica(b, "replica1", db, env...)
	startRun(b, r, uuid.NewString(), message("", "streaming")).readN(3)
	startRun(b, other, uuid.NewString(), message("", "streaming")).readN(3)
	killPrimary(b)
	at := time.Now()
	d := untilNewRun(b, r).Sub(at)
	b.Logf("new runs accepted %v after the kill", d.Round(time.Millisecond))
	return d
}
