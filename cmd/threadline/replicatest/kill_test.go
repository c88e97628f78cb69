package replicatest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// killEnv is a slow model and a lease far longer than the wait for
// recovery: a run of a killed replica that ends within that wait was
// recovered through the presence check, not the lease.
var killEnv = []string{"THREADLINE_BUILTIN_DELAY=10ms", "THREADLINE_BUILTIN_TOKENS=3000", longLease}

// recoveryBound is how long a follower waits for a killed owner's run to
// end; well under the lease.
const recoveryBound = 45 * time.Second

// TestKill9Recovered: a replica killed with SIGKILL in the middle of a run
// has its run recovered by another replica, well before the run's lease
// would run out: a follower on another replica gets every event the
// owner's client got, then the rest, ending with an interrupted snapshot
// whose reply is exactly the streamed text, and replay agrees.
func TestKill9Recovered(t *testing.T) {
	t.Parallel()
	_, rs := cluster(t, 3, killEnv...)
	killRound(t, rs[0], rs[1], rs[2], "kill me")
}

// TestKill9Repeated kills the owner of a streaming run -replica.kills
// times, each time on another replica, restarting the killed one, and
// checks every round as TestKill9Recovered does.
func TestKill9Repeated(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short")
	}
	db, rs := cluster(t, 3, killEnv...)
	for k := range *kills {
		owner, follower, third := rs[k%3], rs[(k+1)%3], rs[(k+2)%3]
		killRound(t, owner, follower, third, fmt.Sprintf("kill round %d", k))
		rs[k%3] = startReplica(t, fmt.Sprintf("replica%d.%d", k%3, k), db, killEnv...)
	}
}

// killRound starts a run on owner, follows it on follower, kills owner
// mid-stream and checks the run's recovery (see TestKill9Recovered).
func killRound(t *testing.T, owner, follower, third *replica, text string) {
	t.Helper()
	tid := uuid.NewString()
	msgID := uuid.NewString()
	live := startRun(t, owner, tid, message(msgID, text))
	first := live.readN(1)[0]
	watch := followWithin(t, follower, tid, first.RunID, 0, recoveryBound)
	live.readN(20)
	owner.kill9()
	seen := live.rest() // what the owner's client got before the kill
	got := watch.rest()
	final := checkRun(t, owner.name+"'s run, followed on "+follower.name, got, 1, "interrupted")
	if len(seen) > len(got) {
		t.Fatalf("the owner's client got %d events, the follower %d", len(seen), len(got))
	}
	sameEvents(t, "the owner's client's events in the follower's", seen[1:], got[1:len(seen)])
	if reply(t, final) != tokens(got) {
		t.Fatalf("recovered reply %q, want the streamed %q", reply(t, final), tokens(got))
	}
	if len(final.Messages) < 2 || final.Messages[0].ID != msgID || final.Messages[0].Content[0].Text != text {
		t.Fatalf("acknowledged user message lost: final snapshot %s", final.Raw)
	}
	replay := follow(t, third, tid, first.RunID, 1).rest()
	sameEvents(t, "replay on "+third.name, got[1:], replay)
	code, body := call(t, http.MethodGet, third.url("/threads/"+tid+"/messages"), "")
	if code != 200 || !strings.Contains(body, `"active_run":null`) {
		t.Fatalf("thread after recovery on %s: %d %s, want no active run", third.name, code, body)
	}
}

// remoteBound is how long TestKill9RemoteFollowers' clients wait for the
// final snapshot: a fifth of the lease it configures (remoteEnv), so a
// run that ends within it was recovered on the owner's death and its end
// reached the other replicas by a wake-up (or their short safety poll),
// neither by the lease's expiry nor by any timer derived from it.
const remoteBound = 12 * time.Second

// remoteEnv is a lease far longer than remoteBound, with death detected
// through the presence lock (the default).
var remoteEnv = []string{"THREADLINE_BUILTIN_DELAY=10ms", "THREADLINE_BUILTIN_TOKENS=3000", "THREADLINE_RUN_LEASE=60s"}

// TestKill9RemoteFollowers: the owner of a streaming run is killed with
// SIGKILL on a cluster of three whose lease is a minute. A follower on
// another replica that followed from the start, one that rejoined there in
// the middle, and the owner's own client rejoining on the third replica
// after the last event it read all get the rest of the run, ending with
// the interrupted snapshot, within a fifth of the lease, each exactly the
// stored log from where it began. Twice, so that the replica that
// recovers is once a follower's and once not necessarily.
func TestKill9RemoteFollowers(t *testing.T) {
	t.Parallel()
	db, rs := cluster(t, 3, remoteEnv...)
	for k := range 2 {
		owner, a, b := rs[k%3], rs[(k+1)%3], rs[(k+2)%3]
		tid := uuid.NewString()
		live := startRun(t, owner, tid, message("", fmt.Sprint("remote followers ", k)))
		runID := live.readN(1)[0].RunID
		fromStart := followWithin(t, a, tid, runID, 0, remoteBound)
		live.readN(10)
		midway := followWithin(t, a, tid, runID, 5, remoteBound)
		fromStart.readN(10)
		midway.readN(1)
		owner.kill9()
		seen := live.rest()
		rejoined := followWithin(t, b, tid, runID, seen[len(seen)-1].Sequence, remoteBound)
		stored := follow(t, b, tid, runID, 0) // after the end, or bounded by the client's timeout
		for _, c := range []struct {
			who   string
			s     *stream
			after int64
		}{{"the follower from the start on " + a.name, fromStart, 0}, {"the follower from 5 on " + a.name, midway, 5},
			{"the owner's client rejoined on " + b.name, rejoined, seen[len(seen)-1].Sequence}} {
			got := c.s.rest()
			if len(got) == 0 || got[len(got)-1].RunStatus != "interrupted" {
				t.Fatalf("round %d: %s has no interrupted snapshot within %v of a %s lease (%d events)", k, c.who, remoteBound, "60s", len(got))
			}
			checkRun(t, c.who, got, c.after+1, "interrupted")
			if c.after == 0 {
				sameEvents(t, c.who+" against the stored log", stored.rest(), got)
			}
		}
		rs[k%3] = startReplica(t, fmt.Sprintf("replica%d.%d", k%3, k), db, remoteEnv...)
	}
}
