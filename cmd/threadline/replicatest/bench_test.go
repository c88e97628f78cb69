package replicatest

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// BenchmarkReplicas measures, with real processes on one database, what
// issue 20 asks of replicas (run with -benchtime 1x; each iteration is the
// whole measurement):
//   - delivery delay: for each count in -replica.followers, a run on
//     replica0 streams to its starting client and to that many followers
//     on replica0 (same) and as many on replica1 (cross). A token's delay
//     at a follower is its arrival time minus its commit time, which is
//     when a LISTEN connection of this process received the group
//     commit's NOTIFY (Postgres sends it at commit), all on one clock;
//     f<N>_same_* and f<N>_cross_* are p50/p99 over every token committed
//     once every follower was live (had its first event);
//   - cancel: from sending a cancel to replica1 until replica0's client has
//     the cancelled snapshot (20 runs);
//   - recovery: from kill -9 of a run's owner until a follower on another
//     replica, and the owner's client rejoined on a third, have the
//     interrupted snapshot (see BenchmarkReplicaRecovery).
func BenchmarkReplicas(b *testing.B) {
	counts := followerCounts(b)
	for range b.N {
		db, rs := cluster(b, 2, "THREADLINE_BUILTIN_DELAY=20ms", "THREADLINE_BUILTIN_TOKENS=400", longLease,
			"THREADLINE_REJOINS_PER_RUN=0", "THREADLINE_STREAMS_PER_CALLER=0")
		commits := listenCommits(b, db)
		for _, n := range counts {
			same, cross := deliveryDelays(b, rs, commits, n)
			report(b, fmt.Sprintf("f%d_same", n), same)
			report(b, fmt.Sprintf("f%d_cross", n), cross)
			b.Logf("%d followers per replica: same p50 %.2f p99 %.2f ms, cross p50 %.2f p99 %.2f ms (%d, %d tokens)",
				n, ms(pct(same, 50)), ms(pct(same, 99)), ms(pct(cross, 50)), ms(pct(cross, 99)), len(same), len(cross))
		}
		c := cancelLatencies(b, 20)
		b.ReportMetric(ms(pct(c, 50)), "cancel_p50_ms")
		b.ReportMetric(ms(pct(c, 100)), "cancel_max_ms")
		f, r := recoveryTimes(b, *benchKills)
		reportRecovery(b, f, r)
	}
}

func report(b *testing.B, name string, ds []time.Duration) {
	b.ReportMetric(ms(pct(ds, 50)), name+"_p50_ms")
	b.ReportMetric(ms(pct(ds, 99)), name+"_p99_ms")
}

// benchFollowers is how many followers BenchmarkReplicas puts on each
// replica, one run per count.
var benchFollowers = flag.String("replica.followers", "1,10,100", "followers per replica in BenchmarkReplicas, comma separated")

func followerCounts(b *testing.B) []int {
	var out []int
	for _, f := range strings.Split(*benchFollowers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("-replica.followers: %q is not a count", f)
		}
		out = append(out, n)
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

// commitLog is when each group commit of each run was announced: the
// NOTIFY on threadline_run with "<run id>:<last seq>" that the store sends
// with every commit while another replica is alive (migration 0010).
type commitLog struct {
	mu sync.Mutex
	at map[string][]commitAt // by run id, in arrival order
}

type commitAt struct {
	seq int64
	t   time.Time
}

// listenCommits LISTENs on a connection of its own until the benchmark
// ends.
func listenCommits(b *testing.B, db string) *commitLog {
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "LISTEN threadline_run"); err != nil {
		b.Fatal(err)
	}
	cl := &commitLog{at: map[string][]commitAt{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				return
			}
			cl.add(n.Payload, time.Now())
		}
	}()
	b.Cleanup(func() {
		cancel()
		<-done
		_ = conn.Close(context.Background())
	})
	return cl
}

func (cl *commitLog) add(payload string, t time.Time) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, item := range strings.Split(payload, ",") {
		id, seq, ok := strings.Cut(item, ":")
		n, err := strconv.ParseInt(seq, 10, 64)
		if ok && err == nil {
			cl.at[id] = append(cl.at[id], commitAt{n, t})
		}
	}
}

// times maps each sequence of the run to when its commit was announced.
func (cl *commitLog) times(runID string) map[int64]time.Time {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	out := map[int64]time.Time{}
	var done int64
	for _, c := range cl.at[runID] {
		for ; done < c.seq; done++ {
			out[done+1] = c.t
		}
	}
	return out
}

// arrivals reads a stream to its end, noting when each token arrived;
// first is called at the first event.
func arrivals(s *stream, first func()) map[int64]time.Time {
	at := map[int64]time.Time{}
	for {
		e, ok := s.next()
		if !ok {
			return at
		}
		if first != nil {
			first()
			first = nil
		}
		if e.Type == "token" {
			at[e.Sequence] = time.Now()
		}
	}
}

func deliveryDelays(b *testing.B, rs []*replica, commits *commitLog, followers int) (same, cross []time.Duration) {
	tid := uuid.NewString()
	live := startRun(b, rs[0], tid, message("", "delivery"))
	runID := live.readN(1)[0].RunID
	go arrivals(live, nil) // the starting client reads on
	subs := make([]*stream, 0, 2*followers)
	for i := range 2 * followers {
		subs = append(subs, follow(b, rs[i%2], tid, runID, 1))
	}
	res := make([]map[int64]time.Time, len(subs))
	var wg, firsts sync.WaitGroup
	for i, s := range subs {
		wg.Add(1)
		firsts.Add(1)
		go func() { defer wg.Done(); res[i] = arrivals(s, firsts.Done) }()
	}
	// Tokens committed from here on went out after every follower had
	// read the log and was live.
	firsts.Wait()
	ready := time.Now()
	wg.Wait()
	at := commits.times(runID)
	for i, got := range res {
		for seq, t := range got {
			c, ok := at[seq]
			if !ok || c.Before(ready) {
				continue
			}
			if i%2 == 0 {
				same = append(same, t.Sub(c))
			} else {
				cross = append(cross, t.Sub(c))
			}
		}
	}
	return same, cross
}

func cancelLatencies(b *testing.B, n int) []time.Duration {
	_, rs := cluster(b, 2, "THREADLINE_BUILTIN_DELAY=10ms", "THREADLINE_BUILTIN_TOKENS=3000", longLease)
	var out []time.Duration
	for i := range n {
		tid := uuid.NewString()
		live := startRun(b, rs[0], tid, message("", fmt.Sprint("cancel ", i)))
		runID := live.readN(10)[0].RunID
		t0 := time.Now()
		if code, body := call(b, http.MethodPost, rs[1].url("/threads/"+tid+"/runs/"+runID+"/cancel"), ""); code != http.StatusAccepted {
			b.Fatalf("cancel: %d %s", code, body)
		}
		evs := live.rest()
		out = append(out, time.Since(t0))
		checkRun(b, "cancelled run", evs, 1, "cancelled")
	}
	return out
}

// benchKills is how many owners BenchmarkReplicas and
// BenchmarkReplicaRecovery kill.
var benchKills = flag.Int("replica.recoveries", 10, "kills in BenchmarkReplicas' and BenchmarkReplicaRecovery's recovery figures")

// BenchmarkReplicaRecovery measures what a client on another replica sees
// of a kill -9 of a run's owner (run with -benchtime 1x): on a cluster of
// three with the default lease (15 s), from the kill until a follower on
// another replica (following from the start) has the final interrupted
// snapshot (recovery_*), and until the owner's own client, rejoining on
// the third replica after the last event it read, has it (rejoin_*);
// p50, p99 and max over -replica.recoveries kills.
func BenchmarkReplicaRecovery(b *testing.B) {
	for range b.N {
		follower, rejoin := recoveryTimes(b, *benchKills)
		reportRecovery(b, follower, rejoin)
	}
}

func reportRecovery(b *testing.B, follower, rejoin []time.Duration) {
	for _, m := range []struct {
		name string
		ds   []time.Duration
	}{{"recovery", follower}, {"rejoin", rejoin}} {
		b.ReportMetric(ms(pct(m.ds, 50)), m.name+"_p50_ms")
		b.ReportMetric(ms(pct(m.ds, 99)), m.name+"_p99_ms")
		b.ReportMetric(ms(pct(m.ds, 100)), m.name+"_max_ms")
	}
	b.Logf("kill -9 to the final snapshot on another replica: follower p50 %.0f p99 %.0f ms, rejoined client p50 %.0f p99 %.0f ms (%d kills)",
		ms(pct(follower, 50)), ms(pct(follower, 99)), ms(pct(rejoin, 50)), ms(pct(rejoin, 99)), len(follower))
}

// recoveryTimes kills the owner of a streaming run n times on a cluster
// of three (each time another replica, restarted after), at a moment that
// moves with each kill, and returns, per kill, how long after it a
// follower on another replica and the owner's client rejoined on the third
// had the final interrupted snapshot.
func recoveryTimes(b *testing.B, n int) (follower, rejoin []time.Duration) {
	env := []string{"THREADLINE_BUILTIN_DELAY=10ms", "THREADLINE_BUILTIN_TOKENS=3000"} // the default lease
	db, rs := cluster(b, 3, env...)
	for k := range n {
		owner, other, third := rs[k%3], rs[(k+1)%3], rs[(k+2)%3]
		tid := uuid.NewString()
		live := startRun(b, owner, tid, message("", fmt.Sprint("recover ", k)))
		runID := live.readN(10)[0].RunID
		watch := followWithin(b, other, tid, runID, 0, recoveryBound)
		watch.readN(10)
		live.readN(10 + 13*(k%8)) // kills 0.13 s apart in the run, over a second
		t0 := time.Now()
		owner.kill9()
		seen := live.rest()
		var watched []event
		var took time.Duration
		done := make(chan struct{})
		go func() {
			defer close(done)
			watched = watch.restQuiet()
			took = time.Since(t0)
		}()
		back := followWithin(b, third, tid, runID, seen[len(seen)-1].Sequence, recoveryBound)
		evs := back.rest()
		rejoin = append(rejoin, time.Since(t0))
		checkRun(b, "rejoined client", evs, seen[len(seen)-1].Sequence+1, "interrupted")
		<-done
		follower = append(follower, took)
		checkRun(b, "recovered run", watched, 1, "interrupted")
		rs[k%3] = startReplica(b, fmt.Sprintf("replica%d.%d", k%3, k), db, env...)
	}
	return follower, rejoin
}
