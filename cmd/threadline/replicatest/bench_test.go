package replicatest

import (
	"flag"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// BenchmarkReplicas measures, with real processes on one database, what
// issue 20 asks of replicas (run with -benchtime 1x; each iteration is the
// whole measurement):
//   - delivery delay: a run on replica0 streams to its starting client and
//     to -replica.followers (100) followers on replica0 and as many on replica1; each follower's delay
//     for a token is its arrival time minus the starting client's (all
//     clients in this process, one clock); same_* and cross_* are p50/p99
//     over every token of every follower;
//   - cancel: from sending a cancel to replica1 until replica0's client has
//     the cancelled snapshot (20 runs);
//   - recovery: from kill -9 of a run's owner until a follower on another
//     replica has the interrupted snapshot (5 kills), leases 2 minutes.
func BenchmarkReplicas(b *testing.B) {
	for range b.N {
		same, cross := deliveryDelays(b)
		b.ReportMetric(ms(pct(same, 50)), "same_p50_ms")
		b.ReportMetric(ms(pct(same, 99)), "same_p99_ms")
		b.ReportMetric(ms(pct(cross, 50)), "cross_p50_ms")
		b.ReportMetric(ms(pct(cross, 99)), "cross_p99_ms")
		c := cancelLatencies(b, 20)
		b.ReportMetric(ms(pct(c, 50)), "cancel_p50_ms")
		b.ReportMetric(ms(pct(c, 99)), "cancel_max_ms")
		r := recoveryTimes(b, 5)
		b.ReportMetric(ms(pct(r, 50)), "recovery_p50_ms")
		b.ReportMetric(ms(pct(r, 100)), "recovery_max_ms")
	}
}

// benchFollowers is how many followers BenchmarkReplicas puts on each replica.
var benchFollowers = flag.Int("replica.followers", 100, "followers per replica in BenchmarkReplicas")

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

// arrivals reads a stream to its end, noting when each token arrived.
func arrivals(s *stream) map[int64]time.Time {
	at := map[int64]time.Time{}
	for {
		e, ok := s.next()
		if !ok {
			return at
		}
		if e.Type == "token" {
			at[e.Sequence] = time.Now()
		}
	}
}

func deliveryDelays(b *testing.B) (same, cross []time.Duration) {
	_, rs := cluster(b, 2, "THREADLINE_BUILTIN_DELAY=20ms", "THREADLINE_BUILTIN_TOKENS=400", longLease,
		"THREADLINE_REJOINS_PER_RUN=0", "THREADLINE_STREAMS_PER_CALLER=0")
	tid := uuid.NewString()
	live := startRun(b, rs[0], tid, message("", "delivery"))
	first := live.readN(1)[0]
	followers := *benchFollowers
	subs := make([]*stream, 0, 2*followers)
	for i := range 2 * followers {
		subs = append(subs, follow(b, rs[i%2], tid, first.RunID, 1))
	}
	// Tokens the starting client reads from here on went out after every
	// follower subscribed (and the backlog it gathered meanwhile is read
	// within the margin: their catch-up reads take a moment).
	ready := time.Now().Add(1500 * time.Millisecond)
	res := make([]map[int64]time.Time, len(subs))
	var wg sync.WaitGroup
	for i, s := range subs {
		wg.Add(1)
		go func() { defer wg.Done(); res[i] = arrivals(s) }()
	}
	ref := arrivals(live)
	wg.Wait()
	for i, at := range res {
		for seq, t := range at {
			r, ok := ref[seq]
			if !ok || r.Before(ready) {
				continue // sent before every client was reading: not live delivery
			}
			if i%2 == 0 {
				same = append(same, t.Sub(r))
			} else {
				cross = append(cross, t.Sub(r))
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

func recoveryTimes(b *testing.B, n int) []time.Duration {
	db, rs := cluster(b, 2, killEnv...)
	var out []time.Duration
	for k := range n {
		owner, other := rs[k%2], rs[(k+1)%2]
		tid := uuid.NewString()
		live := startRun(b, owner, tid, message("", fmt.Sprint("recover ", k)))
		runID := live.readN(10)[0].RunID
		watch := followWithin(b, other, tid, runID, 0, recoveryBound)
		watch.readN(10)
		t0 := time.Now()
		owner.kill9()
		evs := watch.rest()
		out = append(out, time.Since(t0))
		checkRun(b, "recovered run", evs, 1, "interrupted")
		rs[k%2] = startReplica(b, fmt.Sprintf("replica%d.%d", k%2, k), db, killEnv...)
	}
	return out
}
