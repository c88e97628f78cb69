package replicatest

import (
	"flag"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
)

// kills is how many times TestKill9Repeated kills a replica mid-stream.
var kills = flag.Int("replica.kills", 20, "kill -9 rounds of TestKill9Repeated")

// longLease makes every lease far longer than any test step: whatever
// stops or recovers a run within a step is a wake-up or the presence
// check, never a lease renewal or expiry.
const longLease = "THREADLINE_RUN_LEASE=2m"

// TestRejoinOnOtherReplica: a run started on one replica is followed from
// the start on a second and rejoined in the middle on a third; both get
// exactly the events the starting client got, byte for byte, and replays
// after the end agree with them on every replica.
func TestRejoinOnOtherReplica(t *testing.T) {
	t.Parallel()
	_, rs := cluster(t, 3, "THREADLINE_BUILTIN_DELAY=5ms", "THREADLINE_BUILTIN_TOKENS=200", longLease)
	tid := uuid.NewString()
	live := startRun(t, rs[0], tid, message("", "rejoin me elsewhere"))
	first, _ := live.next()
	from1 := follow(t, rs[1], tid, first.RunID, 0)
	mid := live.readN(40)
	from2 := follow(t, rs[2], tid, first.RunID, mid[len(mid)-1].Sequence)
	var wg sync.WaitGroup
	var got1, got2 []event
	wg.Add(2)
	go func() { defer wg.Done(); got1 = from1.rest() }()
	go func() { defer wg.Done(); got2 = from2.rest() }()
	all := live.rest()
	wg.Wait()
	final := checkRun(t, "starting client", all, 1, "succeeded")
	if reply(t, final) != tokens(all) {
		t.Fatalf("final reply %q, want the streamed %q", reply(t, final), tokens(all))
	}
	// The first snapshot is rebuilt from the tree on another replica; every
	// other event must be the same bytes.
	sameEvents(t, "follower on replica1 (after the first snapshot)", all[1:], got1[1:])
	checkRun(t, "follower on replica1", got1, 1, "succeeded")
	sameEvents(t, "rejoin on replica2", all[len(mid):], got2)
	for _, r := range rs {
		replay := follow(t, r, tid, first.RunID, 1).rest()
		sameEvents(t, "replay on "+r.name, all[1:], replay)
	}
}

// TestCrossReplicaCancel: a cancel sent to another replica than the owner
// stops the run: it ends cancelled, with the partial reply, long before
// the model would have finished, with leases too long to carry it.
func TestCrossReplicaCancel(t *testing.T) {
	t.Parallel()
	_, rs := cluster(t, 3, "THREADLINE_BUILTIN_DELAY=10ms", "THREADLINE_BUILTIN_TOKENS=1000", longLease)
	for i := range 6 {
		owner, other := rs[i%3], rs[(i+1)%3]
		tid := uuid.NewString()
		live := startRun(t, owner, tid, message("", fmt.Sprintf("cancel me %d", i)))
		evs := live.readN(5)
		runID := evs[0].RunID
		watcher := follow(t, rs[(i+2)%3], tid, runID, 0)
		if code, body := call(t, http.MethodPost, other.url("/threads/"+tid+"/runs/"+runID+"/cancel"), ""); code != http.StatusAccepted {
			t.Fatalf("cancel on %s: status %d %s, want 202", other.name, code, body)
		}
		all := live.rest()
		final := checkRun(t, "owner's client", all, 1, "cancelled")
		if len(all) >= 1000 {
			t.Fatalf("cancelled run streamed %d events: the cancel did not stop it", len(all))
		}
		if reply(t, final) != tokens(all) {
			t.Fatalf("cancelled reply %q, want the streamed %q", reply(t, final), tokens(all))
		}
		sameEvents(t, "third replica's follower", all[1:], watcher.rest()[1:])
	}
}

// TestCrossReplicaDelete: deleting the thread on another replica stops its
// run on the owner, and a thread created again under the same id is served
// fresh by every replica, including those that had the old one cached.
func TestCrossReplicaDelete(t *testing.T) {
	t.Parallel()
	_, rs := cluster(t, 3, "THREADLINE_BUILTIN_DELAY=10ms", "THREADLINE_BUILTIN_TOKENS=1000", longLease)
	tid := uuid.NewString()
	// A first exchange every replica reads (and caches).
	short := startRun(t, rs[0], tid, `{"message":{"content":"old thread"},"run_config":{"model":"builtin"}}`)
	evs := short.readN(3)
	if code, body := call(t, http.MethodPost, rs[0].url("/threads/"+tid+"/runs/"+evs[0].RunID+"/cancel"), ""); code != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", code, body)
	}
	checkRun(t, "first run", short.rest(), 1, "cancelled")
	for _, r := range rs {
		if code, body := call(t, http.MethodGet, r.url("/threads/"+tid+"/messages"), ""); code != 200 || !strings.Contains(body, "old thread") {
			t.Fatalf("messages on %s: %d %s", r.name, code, body)
		}
	}
	live := startRun(t, rs[0], tid, message("", "delete me elsewhere"))
	evs = live.readN(5)
	if code, body := call(t, http.MethodDelete, rs[1].url("/threads/"+tid), ""); code != http.StatusNoContent {
		t.Fatalf("delete on replica1: %d %s, want 204", code, body)
	}
	all := live.rest()
	if len(all) >= 1000 {
		t.Fatalf("the run on the deleted thread streamed %d events: the delete did not stop it", len(all))
	}
	for _, r := range rs {
		if code, _ := call(t, http.MethodGet, r.url("/threads/"+tid+"/runs/"+evs[0].RunID), ""); code != http.StatusNotFound {
			t.Fatalf("run of the deleted thread on %s: status %d, want 404", r.name, code)
		}
	}
	// Created again under the same id, on the replica that deleted it.
	again := startRun(t, rs[1], tid, `{"message":{"content":"new thread"},"run_config":{"model":"builtin"}}`)
	ev2 := again.readN(3)
	if code, body := call(t, http.MethodPost, rs[1].url("/threads/"+tid+"/runs/"+ev2[0].RunID+"/cancel"), ""); code != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", code, body)
	}
	checkRun(t, "run on the recreated thread", again.rest(), 1, "cancelled")
	var want string
	for i, r := range rs {
		code, body := call(t, http.MethodGet, r.url("/threads/"+tid+"/messages"), "")
		if code != 200 || strings.Contains(body, "old thread") || !strings.Contains(body, "new thread") {
			t.Fatalf("recreated thread on %s: %d %s, want only the new thread", r.name, code, body)
		}
		if i == 0 {
			want = body
		} else if body != want {
			t.Fatalf("recreated thread on %s differs:\n got %s\nwant %s", r.name, body, want)
		}
	}
}

// TestInterleavedWrites: runs, a regenerate, an edit and head changes
// written in turn through three replicas leave byte-identical snapshots and
// checkpoint trees on every replica, each of which had read (and cached)
// the thread between the writes.
func TestInterleavedWrites(t *testing.T) {
	t.Parallel()
	_, rs := cluster(t, 3, "THREADLINE_BUILTIN_DELAY=0", "THREADLINE_BUILTIN_TOKENS=12", longLease)
	tid := uuid.NewString()
	var path []string // the ids of the last run's final snapshot, root first
	readAll := func(step string) {
		t.Helper()
		for _, p := range []string{"/messages", "/checkpoints"} {
			var want string
			for i, r := range rs {
				code, body := call(t, http.MethodGet, r.url("/threads/"+tid+p), "")
				if code != 200 {
					t.Fatalf("%s: GET %s on %s: %d %s", step, p, r.name, code, body)
				}
				if i == 0 {
					want = body
				} else if body != want {
					t.Fatalf("%s: GET %s on %s differs from replica0:\n got %s\nwant %s", step, p, r.name, body, want)
				}
			}
		}
	}
	for i := range 9 {
		r := rs[i%3]
		n := len(path)
		var body string
		switch {
		case i == 0:
			body = message("", "turn 0")
		case i%4 == 3:
			// Regenerate the last reply.
			body = fmt.Sprintf(`{"parent_message_id":%q}`, path[n-2])
		case i%4 == 2:
			// Edit the last user message: a sibling under the same parent.
			parent := "null"
			if n >= 3 {
				parent = fmt.Sprintf("%q", path[n-3])
			}
			body = fmt.Sprintf(`{"message":{"content":"edit %d"},"parent_message_id":%s,"source_message_id":%q}`, i, parent, path[n-2])
		default:
			body = fmt.Sprintf(`{"message":{"content":"turn %d"},"parent_message_id":%q}`, i, path[n-1])
		}
		s, code, msg := tryRun(t, r, tid, body)
		if s == nil {
			t.Fatalf("step %d on %s: %d %s (body %s)", i, r.name, code, msg, body)
		}
		evs := s.rest()
		final := checkRun(t, fmt.Sprintf("step %d", i), evs, 1, "succeeded")
		path = path[:0]
		for _, m := range final.Messages {
			path = append(path, m.ID)
		}
		readAll(fmt.Sprintf("after step %d", i))
		if i == 4 {
			if code, b := call(t, http.MethodPut, rs[(i+1)%3].url("/threads/"+tid+"/head"), fmt.Sprintf(`{"message_id":%q}`, path[len(path)-2])); code != http.StatusNoContent {
				t.Fatalf("head: %d %s", code, b)
			}
			readAll("after a head change")
		}
	}
}

// TestConcurrentStarts: three replicas start a run on the same thread at
// the same moment: one gets 200, the other two 409 run_in_progress naming
// the winner's run.
func TestConcurrentStarts(t *testing.T) {
	t.Parallel()
	_, rs := cluster(t, 3, "THREADLINE_BUILTIN_DELAY=5ms", "THREADLINE_BUILTIN_TOKENS=100", longLease)
	type answer struct {
		s    *stream
		code int
		body string
	}
	for round := range 5 {
		tid := uuid.NewString()
		// An existing thread, so the starts race on the same row.
		checkRun(t, "first run", startRun(t, rs[0], tid, `{"message":{"content":"hello"},"run_config":{"model":"builtin"}}`).rest(), 1, "succeeded")
		answers := make([]answer, len(rs))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, r := range rs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				s, code, body := tryRun(t, r, tid, message("", fmt.Sprintf("race %d from %s", round, r.name)))
				answers[i] = answer{s, code, body}
			}()
		}
		close(start)
		wg.Wait()
		var winner string
		var busy []string
		for _, a := range answers {
			switch {
			case a.code == http.StatusOK && winner == "":
				evs := a.s.rest()
				checkRun(t, "winner", evs, 1, "succeeded")
				winner = evs[0].RunID
			case a.code == http.StatusConflict && strings.Contains(a.body, "run_in_progress"):
				busy = append(busy, a.body)
			default:
				t.Fatalf("round %d: answer %d %s, want one 200 and the rest 409 run_in_progress", round, a.code, a.body)
			}
		}
		if winner == "" || len(busy) != len(rs)-1 {
			t.Fatalf("round %d: winner %q and %d answers 409, want one winner and %d", round, winner, len(busy), len(rs)-1)
		}
		for _, body := range busy {
			if !strings.Contains(body, winner) {
				t.Fatalf("round %d: 409 %s, want it to name the winner's run %s", round, body, winner)
			}
		}
	}
}
