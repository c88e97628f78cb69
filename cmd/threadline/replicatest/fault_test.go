package replicatest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

// Fault tests: Postgres stopped or restarted under streaming runs, an owner
// paused past its lease, SIGTERM with streams in flight. Each checks what
// issue 20 asks of every fault: every run ends with a final snapshot in its
// log, every stream ends with that snapshot (after an error event where
// something failed), no acknowledged message is lost, replay is gap-free
// and equals what live clients saw, and the thread takes new runs.

// faultBound bounds every wait of these tests on a run's end.
const faultBound = 60 * time.Second

// signal sends sig to the replica's process.
func (r *replica) signal(sig syscall.Signal) {
	r.t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("signal %v to %s: %v", sig, r.name, err)
	}
}

// waitLog waits until the replica has logged a line holding s (at least n
// such lines in all), for at most d.
func (r *replica) waitLog(s string, n int, d time.Duration) {
	r.t.Helper()
	wait.Eventually(r.t, d, func() bool { return strings.Count(r.log(), s) >= n },
		"%s logged %q %v times in %v, want %d", r.name, s, func() any { return strings.Count(r.log(), s) }, d, n)
}

// Once Postgres is back, requests are served at once: none meets a pooled
// connection that died with the server (the store checks each one it hands
// out), so the requests below are sent once, and a 503 fails the test. Only
// requests sent while Postgres is down or starting (tryCancel, and the
// starts of startsAroundOutage) may meet a 503.

// rejoin follows run runID on r after sequence after (the stream bounded by
// faultBound); it fails the test unless the answer is 200.
func rejoin(t *testing.T, r *replica, tid, runID string, after int64) *stream {
	t.Helper()
	return followWithin(t, r, tid, runID, after, faultBound)
}

// faultRun is one run under a fault: the client that started it on its
// owner and a follower on another replica, both read to their end in the
// background.
type faultRun struct {
	tid, msgID, text string
	runID            string
	owner, other     *replica
	live, watch      *stream
	liveDone         chan struct{} // the live stream ended (liveEvs is set)
	watchDone        chan struct{} // the follower's stream ended (watched is set)
	done             chan struct{} // both ended
	liveEvs, watched []event
}

// startFaultRun starts a run on owner, waits for its first n events and
// follows it from the start on other; both streams are then read to their
// end in the background (wait).
func startFaultRun(t *testing.T, owner, other *replica, text string, n int) *faultRun {
	t.Helper()
	f := &faultRun{tid: uuid.NewString(), msgID: uuid.NewString(), text: text, owner: owner, other: other,
		liveDone: make(chan struct{}), watchDone: make(chan struct{}), done: make(chan struct{})}
	f.live = startRun(t, owner, f.tid, message(f.msgID, text))
	f.runID = f.live.readN(n)[0].RunID
	f.watch = followWithin(t, other, f.tid, f.runID, 0, faultBound)
	go func() { defer close(f.liveDone); f.liveEvs = f.live.rest() }()
	go func() { defer close(f.watchDone); f.watched = f.watch.rest() }()
	go func() { <-f.liveDone; <-f.watchDone; close(f.done) }()
	return f
}

// wait waits for both streams to end, for at most faultBound.
func (f *faultRun) wait(t *testing.T) {
	t.Helper()
	waitFor(t, f.done, "run "+f.runID+": its streams")
}

// waitFor waits for ch to close, for at most faultBound.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(faultBound + 10*time.Second):
		t.Fatalf("%s did not end", what)
	}
}

// check checks the ended run as every fault test does, with its final
// status want ("" for any final status): both streams are gap-free and end
// with the final snapshot (after an error event unless the run succeeded
// or was cancelled); the follower saw exactly what the live client saw;
// the reply is the streamed text; the user message is kept; replay on
// both replicas equals what the clients saw; and the thread takes a new
// run on the other replica. It returns that new run's final event.
func (f *faultRun) check(t *testing.T, want string) event {
	t.Helper()
	final := checkRun(t, "live client of "+f.runID, f.liveEvs, 1, want)
	checkErrorBeforeFinal(t, "live client of "+f.runID, f.liveEvs)
	checkRun(t, "follower on "+f.other.name+" of "+f.runID, f.watched, 1, final.RunStatus)
	// The first snapshot is rebuilt from the tree on another replica;
	// every other event must be the same bytes.
	sameEvents(t, "follower on "+f.other.name, f.liveEvs[1:], f.watched[1:])
	if got := reply(t, final); got != tokens(f.liveEvs) {
		t.Fatalf("run %s: final reply %q, want the streamed %q", f.runID, got, tokens(f.liveEvs))
	}
	if len(final.Messages) < 2 || final.Messages[len(final.Messages)-2].ID != f.msgID ||
		final.Messages[len(final.Messages)-2].Content[0].Text != f.text {
		t.Fatalf("run %s: acknowledged user message %s lost: final snapshot %s", f.runID, f.msgID, final.Raw)
	}
	for _, r := range []*replica{f.owner, f.other} {
		select {
		case <-r.done:
			continue // exited
		default:
		}
		replay := rejoin(t, r, f.tid, f.runID, 1).rest()
		sameEvents(t, "replay on "+r.name+" of "+f.runID, f.liveEvs[1:], replay)
	}
	t.Logf("%q: %d events, a %d-byte reply, ended %s; its follower on %s and the replays: identical", f.text, len(f.liveEvs), len(tokens(f.liveEvs)), final.RunStatus, f.other.name)
	return f.takesNewRun(t, f.other, final)
}

// takesNewRun starts a run on r that continues the thread after final's
// reply and checks that it streams, ends (cancelled after its first
// events) and keeps the earlier messages. It returns its final event.
func (f *faultRun) takesNewRun(t *testing.T, r *replica, final event) event {
	t.Helper()
	code, body := call(t, http.MethodGet, r.url("/threads/"+f.tid+"/messages"), "")
	if code != 200 || !strings.Contains(body, `"active_run":null`) || !strings.Contains(body, f.msgID) {
		t.Fatalf("thread %s on %s after the run: %d %s, want no active run and message %s", f.tid, r.name, code, body, f.msgID)
	}
	last := final.Messages[len(final.Messages)-1].ID
	s, code, msg := tryRun(t, r, f.tid, fmt.Sprintf(`{"message":{"content":"and after"},"parent_message_id":%q,"run_config":{"model":"builtin"}}`, last))
	if s == nil {
		t.Fatalf("new run on thread %s on %s: %d %s, want 200", f.tid, r.name, code, msg)
	}
	// Its first events show it runs; a cancel then ends it early (the
	// models of these tests are slow).
	evs := s.readN(3)
	if code, body := call(t, http.MethodPost, r.url("/threads/"+f.tid+"/runs/"+evs[0].RunID+"/cancel"), ""); code != http.StatusAccepted {
		t.Fatalf("cancel of the new run on %s: %d %s, want 202", r.name, code, body)
	}
	evs = s.rest()
	next := checkRun(t, "new run on "+r.name, evs, 1, "")
	if next.RunStatus != "succeeded" && next.RunStatus != "cancelled" {
		t.Fatalf("new run on thread %s: ended %s, want succeeded or cancelled", f.tid, next.RunStatus)
	}
	if len(next.Messages) != len(final.Messages)+2 {
		t.Fatalf("new run on thread %s: %d messages, want %d (the earlier ones kept)", f.tid, len(next.Messages), len(final.Messages)+2)
	}
	return next
}

// checkErrorBeforeFinal: a run that ended interrupted or failed has an
// error event right before its final snapshot.
func checkErrorBeforeFinal(t *testing.T, who string, evs []event) {
	t.Helper()
	last := evs[len(evs)-1]
	if last.RunStatus != "interrupted" && last.RunStatus != "failed" {
		return
	}
	if len(evs) < 2 || evs[len(evs)-2].Type != "error" {
		t.Fatalf("%s: run ended %s with no error event before its final snapshot", who, last.RunStatus)
	}
}

// TestPostgresStopped stops Postgres for several seconds under streaming
// runs, each followed from another replica: runs of one replica end while
// it is down, runs of the other go on after it is back. While it is down a
// new run is refused with 503 and nothing is acknowledged. Within a lease
// every run ends succeeded with every streamed token in its reply (the
// failed appends and end writes are retried). Past a lease (the outage
// outlasts it), a run whose end could not be written within it is
// released, and every run ends as one process wrote it (succeeded, or
// interrupted by recovery after a run_interrupted error event, its owner
// fenced); either way every check of faultRun.check holds. Crashed
// (Postgres's immediate shutdown, then crash recovery), every event a
// client saw survives: it was committed before it was sent.
func TestPostgresStopped(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, lease, want string
		crash             bool // an immediate shutdown, as a crash: no checkpoint, crash recovery at start
	}{
		{"within the lease", longLease, "succeeded", false},
		{"past the lease", "THREADLINE_RUN_LEASE=2s", "", false},
		{"crashed", longLease, "succeeded", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pg := pgtest.NewPrivate(t)
			short := startReplica(t, "replica0", pg.URL, "THREADLINE_BUILTIN_DELAY=10ms", "THREADLINE_BUILTIN_TOKENS=150", tc.lease)
			long := startReplica(t, "replica1", pg.URL, "THREADLINE_BUILTIN_DELAY=10ms", "THREADLINE_BUILTIN_TOKENS=1000", tc.lease)
			var runs []*faultRun
			for i := range 2 {
				runs = append(runs, startFaultRun(t, short, long, fmt.Sprintf("short run %d", i), 3))
				runs = append(runs, startFaultRun(t, long, short, fmt.Sprintf("long run %d", i), 3))
			}
			if tc.crash {
				pg.Crash()
			} else {
				pg.Stop()
			}
			for _, r := range []*replica{short, long} {
				if s, code, body := tryRun(t, r, uuid.NewString(), message("", "while down")); s != nil || code != http.StatusServiceUnavailable {
					t.Fatalf("a run on %s while Postgres is down: %d %s, want 503", r.name, code, body)
				}
			}
			time.Sleep(5 * time.Second) // the outage itself
			pg.Start()
			for _, f := range runs {
				f.wait(t)
			}
			ended := map[string]int{}
			for _, f := range runs {
				f.check(t, tc.want)
				ended[f.liveEvs[len(f.liveEvs)-1].RunStatus]++
			}
			t.Logf("runs ended: %v", ended)
		})
	}
}

// TestPostgresRestartedMidStream restarts Postgres at once (down for well
// under a second), three times, while runs stream, each followed from
// another replica: no stream freezes. After each restart each client gets
// more events while the run goes on, and a cancel sent after the last ends
// it cancelled long before the model would have finished (a frozen stream
// would deliver its events only at the run's end, after the cancel could
// stop nothing).
func TestPostgresRestartedMidStream(t *testing.T) {
	t.Parallel()
	pg := pgtest.NewPrivate(t)
	env := []string{"THREADLINE_BUILTIN_DELAY=10ms", "THREADLINE_BUILTIN_TOKENS=3000", longLease}
	rs := []*replica{startReplica(t, "replica0", pg.URL, env...), startReplica(t, "replica1", pg.URL, env...)}
	var runs []*faultRun
	for i := range 4 {
		runs = append(runs, startFaultRun(t, rs[i%2], rs[(i+1)%2], fmt.Sprintf("restart run %d", i), 3))
	}
	for round := range 3 {
		down := pg.Restart()
		t.Logf("restart %d: Postgres down and back within %v", round, down)
		after := make([][2]int64, len(runs))
		for i, f := range runs {
			after[i] = [2]int64{f.live.n.Load(), f.watch.n.Load()}
		}
		deadline := time.Now().Add(faultBound) // for all the runs
		for i, f := range runs {
			live := func() any { return f.live.n.Load() }
			watch := func() any { return f.watch.n.Load() }
			wait.Eventually(t, time.Until(deadline), func() bool {
				select {
				case <-f.done:
					t.Fatalf("run %s ended before streaming 30 more events after restart %d (live %d, follower %d events)", f.runID, round, f.live.n.Load(), f.watch.n.Load())
				default:
				}
				return f.live.n.Load() >= after[i][0]+30 && f.watch.n.Load() >= after[i][1]+30
			}, "run %s: streams frozen after restart %d: live %v events (%d at the restart), follower %v (%d)",
				f.runID, round, live, after[i][0], watch, after[i][1])
		}
	}
	for _, f := range runs {
		cancelRun(t, f.other, f)
	}
	for _, f := range runs {
		f.wait(t)
		f.check(t, "cancelled")
		if n := len(f.liveEvs); n >= 3000 {
			t.Fatalf("run %s streamed %d events: the cancel after the restart stopped nothing", f.runID, n)
		}
	}
}

// TestStalledOwnerFenced pauses the owner of a streaming run (SIGSTOP)
// past its lease while a second replica runs on the same database: the
// second recovers the run (interrupted, after a run_interrupted error
// event). Then the owner continues (SIGCONT): it finds its claim taken and
// publishes nothing more, so its client, a second client that rejoined the
// run on it, and the follower on the other replica all have exactly the
// stored log, ending with the recovered final snapshot; both replicas take
// new runs on the thread. A client that followed on the stalled replica a
// run of the other replica gets, once it continues, exactly that run's
// events, up to its end.
func TestStalledOwnerFenced(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	env := []string{"THREADLINE_BUILTIN_DELAY=10ms", "THREADLINE_BUILTIN_TOKENS=3000", "THREADLINE_RUN_LEASE=2s"}
	owner := startReplica(t, "replica0", db, env...)
	other := startReplica(t, "replica1", db, env...)
	f := startFaultRun(t, owner, other, "stall me", 20)
	second, secondDone := readAll(followWithin(t, owner, f.tid, f.runID, 0, faultBound))
	foreign := startFaultRun(t, other, owner, "followed on the stalled replica", 20)
	owner.signal(syscall.SIGSTOP)
	stopped := true
	t.Cleanup(func() {
		if stopped {
			_ = owner.cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	waitFor(t, f.watchDone, "the follower's stream while the owner is stopped")
	select {
	case <-f.liveDone:
		t.Fatalf("the stopped owner's stream ended while it was stopped")
	default:
	}
	owner.signal(syscall.SIGCONT)
	stopped = false
	f.wait(t)
	waitFor(t, secondDone, "the second client's stream on the stalled owner")
	next := f.check(t, "interrupted")
	if n := len(f.liveEvs); n >= 3000 {
		t.Fatalf("the stalled owner's client got %d events: the run was not stopped", n)
	}
	checkRun(t, "second client on the stalled owner", *second, 1, "interrupted")
	sameEvents(t, "second client on the stalled owner", f.liveEvs[1:], (*second)[1:])
	// The owner, running again, takes a run on the thread too.
	f.takesNewRun(t, owner, next)
	// The other replica's run, followed on the stalled one, goes on.
	for foreign.watch.n.Load() < 40 {
		select {
		case <-foreign.done:
			t.Fatalf("run %s ended before its follower on the stalled replica got 40 events", foreign.runID)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancelRun(t, other, foreign)
	foreign.wait(t)
	foreign.check(t, "cancelled")
}

// readAll reads s to its end in the background: the events are in *evs
// once done is closed.
func readAll(s *stream) (evs *[]event, done chan struct{}) {
	evs, done = new([]event), make(chan struct{})
	go func() { defer close(done); *evs = s.rest() }()
	return evs, done
}

// cancelRun asks r to cancel f's run; it fails the test unless the answer
// is 202.
func cancelRun(t *testing.T, r *replica, f *faultRun) {
	t.Helper()
	if code, body := call(t, http.MethodPost, r.url("/threads/"+f.tid+"/runs/"+f.runID+"/cancel"), ""); code != http.StatusAccepted {
		t.Fatalf("cancel of %s on %s: %d %s, want 202", f.runID, r.name, code, body)
	}
}

// tryCancel asks r to cancel f's run while Postgres may be down or
// starting: again while it answers 503, for at most faultBound. It may run
// on any goroutine, and returns what went wrong.
func tryCancel(r *replica, f *faultRun) error {
	deadline := time.Now().Add(faultBound)
	for {
		resp, err := client.Post(r.url("/threads/"+f.tid+"/runs/"+f.runID+"/cancel"), "application/json", nil)
		if err != nil {
			return fmt.Errorf("cancel of %s on %s: %v", f.runID, r.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusAccepted {
			return nil
		}
		if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return fmt.Errorf("cancel of %s on %s: %d %s, want 202", f.runID, r.name, resp.StatusCode, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSIGTERMWithStreams sends SIGTERM to a replica with streams in
// flight: runs it owns that outlive its grace end cancelled, with their
// final snapshot on the owner's clients and on followers on another
// replica, and it exits cleanly soon after its grace. A client following
// on it a run another replica owns has its stream ended at the grace (it
// used to hold the shutdown until the HTTP server's own timeout, which
// failed the exit); it rejoins on the owner from the last event it read
// and misses nothing.
func TestSIGTERMWithStreams(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	env := []string{"THREADLINE_BUILTIN_DELAY=10ms", "THREADLINE_BUILTIN_TOKENS=3000", longLease}
	const grace = time.Second
	owner := startReplica(t, "replica0", db, append(env, "THREADLINE_SHUTDOWN_GRACE="+grace.String())...)
	other := startReplica(t, "replica1", db, env...)
	var runs []*faultRun
	for i := range 3 {
		runs = append(runs, startFaultRun(t, owner, other, fmt.Sprintf("drain run %d", i), 3))
	}
	foreign := startFaultRun(t, other, owner, "followed on the draining replica", 3)
	sent := time.Now()
	owner.signal(syscall.SIGTERM)
	waitFor(t, owner.done, owner.name+" after SIGTERM")
	took := time.Since(sent)
	t.Logf("%s exited %v after SIGTERM (grace %v): %v", owner.name, took, grace, owner.err)
	if owner.err != nil {
		t.Fatalf("%s exit after SIGTERM: %v, want a clean exit", owner.name, owner.err)
	}
	// Past the grace only the runs' end writes remain. The HTTP server's
	// shutdown waits up to 5 s for open streams, then fails the exit: a
	// process that reached it held a stream open past its grace.
	if bound := grace + 4*time.Second; took > bound {
		t.Fatalf("%s exited %v after SIGTERM, want within its grace %v and its runs' end writes (bound %v)", owner.name, took, grace, bound)
	}
	for _, f := range runs {
		f.wait(t)
		f.check(t, "cancelled")
	}
	// The follower on the draining replica ended with it; it rejoins on
	// the run's owner from the last event it read.
	waitFor(t, foreign.watchDone, "the follower on the draining replica")
	seen := foreign.watched
	if len(seen) == 0 {
		t.Fatal("the follower on the draining replica got no events")
	}
	var rest []event
	if last := seen[len(seen)-1]; last.RunStatus == "" || last.RunStatus == "running" {
		again := rejoin(t, other, foreign.tid, foreign.runID, last.Sequence)
		again.readN(1)
		cancelRun(t, other, foreign)
		rest = again.rest()
	} else {
		t.Logf("the follower on the draining replica got the whole run (%s)", last.RunStatus)
	}
	waitFor(t, foreign.liveDone, "the foreign run's live stream")
	got := append(append([]event{}, seen...), rest...)
	checkRun(t, "the follower that rejoined", got, 1, foreign.liveEvs[len(foreign.liveEvs)-1].RunStatus)
	sameEvents(t, "the follower that rejoined", foreign.liveEvs[1:], got[1:])
}

// TestNotifierAfterPostgresRestart: each replica's listening connection
// (wake-ups and presence lock) comes back after Postgres was stopped for a
// while and started again. A cancel sent to another replica the moment
// Postgres is back, when the owner may not be listening yet, stops the
// run; afterwards cross-replica followers get exactly the owner's events,
// cancels in both directions stop runs at once (the leases are far too
// long to carry them), and a replica killed with SIGKILL is found dead
// through its presence lock, its run recovered long before its lease.
func TestNotifierAfterPostgresRestart(t *testing.T) {
	t.Parallel()
	pg := pgtest.NewPrivate(t)
	env := []string{"THREADLINE_BUILTIN_DELAY=10ms", "THREADLINE_BUILTIN_TOKENS=3000", longLease}
	a := startReplica(t, "replica0", pg.URL, env...)
	b := startReplica(t, "replica1", pg.URL, env...)
	across := startFaultRun(t, a, b, "across the restart", 3)
	pg.Stop()
	time.Sleep(3 * time.Second) // the outage: the listeners' reconnect backoff grows
	// The cancel is sent again and again while Postgres starts, so that it
	// lands as soon as it can: most often before the owner's listening
	// connection is back, so that its wake-up is lost and only the reset
	// after the reconnect can tell the owner.
	cancelled := make(chan error, 1)
	go func() { cancelled <- tryCancel(b, across) }()
	pg.Start()
	if err := <-cancelled; err != nil {
		t.Fatal(err)
	}
	across.wait(t)
	across.check(t, "cancelled")
	if n := len(across.liveEvs); n >= 3000 {
		t.Fatalf("run %s streamed %d events: the cancel sent as Postgres came back stopped nothing", across.runID, n)
	}
	a.waitLog("notifier reconnected", 1, faultBound)
	b.waitLog("notifier reconnected", 1, faultBound)
	for i, pair := range [][2]*replica{{a, b}, {b, a}} {
		owner, other := pair[0], pair[1]
		f := startFaultRun(t, owner, other, fmt.Sprintf("after the restart %d", i), 3)
		for f.watch.n.Load() < 20 {
			select {
			case <-f.done:
				t.Fatalf("run %s ended before its follower on %s got 20 events", f.runID, other.name)
			case <-time.After(20 * time.Millisecond):
			}
		}
		cancelRun(t, other, f)
		f.wait(t)
		f.check(t, "cancelled")
		if n := len(f.liveEvs); n >= 3000 {
			t.Fatalf("run %s streamed %d events: the cancel on %s stopped nothing", f.runID, n, other.name)
		}
	}
	k := startFaultRun(t, a, b, "killed after the restart", 20)
	a.kill9()
	waitFor(t, k.done, "the killed replica's run")
	got := checkRun(t, "follower of the killed replica's run", k.watched, 1, "interrupted")
	checkErrorBeforeFinal(t, "follower of the killed replica's run", k.watched)
	if len(k.liveEvs) > len(k.watched) {
		t.Fatalf("the killed owner's client got %d events, the follower %d", len(k.liveEvs), len(k.watched))
	}
	sameEvents(t, "the killed owner's client's events in the follower's", k.liveEvs[1:], k.watched[1:len(k.liveEvs)])
	if reply(t, got) != tokens(k.watched) {
		t.Fatalf("recovered reply %q, want the streamed %q", reply(t, got), tokens(k.watched))
	}
	k.takesNewRun(t, b, got)
}

// rejoinLive is what a client does when its stream ended without a final
// snapshot (its process went away): it rejoins on r after the last
// sequence it read and reads the rest, appended to liveEvs.
func (f *faultRun) rejoinLive(t *testing.T, r *replica) {
	t.Helper()
	waitFor(t, f.liveDone, "run "+f.runID+": the live stream")
	if len(f.liveEvs) == 0 {
		t.Fatalf("run %s: the live client got no events", f.runID)
	}
	if last := f.liveEvs[len(f.liveEvs)-1]; last.Type == "snapshot" && last.RunStatus != "" && last.RunStatus != "running" {
		return
	}
	after := f.liveEvs[len(f.liveEvs)-1].Sequence
	f.liveEvs = append(f.liveEvs, rejoin(t, r, f.tid, f.runID, after).rest()...)
}

// TestOwnerGoneDuringOutage ends a replica with streaming runs while
// Postgres is down, by SIGTERM (grace 1 s) or SIGKILL. With SIGTERM the
// ends of its runs cannot be written, so it exits soon after its grace
// without them. Once Postgres is back the other replica finds it gone (its
// presence lock is not held; the leases are 2 minutes) and recovers its
// runs interrupted, after run_interrupted. The owner's clients, whose
// streams ended with the process, rejoin on the other replica after the
// last event they read; the followers there kept their streams through the
// outage. Every check of faultRun.check holds.
func TestOwnerGoneDuringOutage(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			pg := pgtest.NewPrivate(t)
			env := []string{"THREADLINE_BUILTIN_DELAY=10ms", "THREADLINE_BUILTIN_TOKENS=3000", longLease}
			const grace = time.Second
			owner := startReplica(t, "replica0", pg.URL, append(env, "THREADLINE_SHUTDOWN_GRACE="+grace.String())...)
			other := startReplica(t, "replica1", pg.URL, env...)
			var runs []*faultRun
			for i := range 2 {
				runs = append(runs, startFaultRun(t, owner, other, fmt.Sprintf("%v while down %d", sig, i), 3))
			}
			pg.Stop()
			sent := time.Now()
			owner.signal(sig)
			waitFor(t, owner.done, fmt.Sprintf("%s after %v", owner.name, sig))
			took := time.Since(sent)
			t.Logf("%s exited %v after %v with Postgres down (grace %v): %v", owner.name, took, sig, grace, owner.err)
			// Past the grace: the end writes, tried once more, and leaving
			// the presence table, bounded at 2 s.
			if bound := grace + 6*time.Second; sig == syscall.SIGTERM && (owner.err != nil || took > bound) {
				t.Fatalf("%s exited %v after SIGTERM (%v), want a clean exit within its grace %v and its last writes (bound %v)", owner.name, took, owner.err, grace, bound)
			}
			pg.Start()
			for _, f := range runs {
				f.rejoinLive(t, other)
				f.wait(t)
				f.check(t, "interrupted")
			}
		})
	}
}

// outageStart is one run start sent around a database outage.
type outageStart struct {
	tid, msgID, body string
	r                *replica
	code             int
	answer           string
	evs              []event
}

// send posts the start and, if it is acknowledged (200), reads its stream
// to the end. It may run on any goroutine.
func (o *outageStart) send(t *testing.T, r *replica) {
	req, _ := http.NewRequest(http.MethodPost, r.url("/threads/"+o.tid+"/runs/stream"), strings.NewReader(o.body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		o.code, o.answer = -1, err.Error()
		return
	}
	defer resp.Body.Close()
	o.code = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		o.answer = string(b)
		return
	}
	s := &stream{t: t, resp: resp, r: bufio.NewReader(resp.Body)}
	o.evs = s.rest()
}

// TestStartsDuringOutage starts runs on new threads on both replicas, one
// every few milliseconds, while Postgres stops (or crashes), is down and
// starts up again under them: each start is acknowledged (200 with its
// events) or refused (503), nothing else.
// Once Postgres is back every acknowledged run has ended with its final
// snapshot holding its user message, and every refused start, sent again
// (once) with the same message id to the other replica, gives one run: the thread
// then holds that message exactly once (a start that committed although
// its answer was lost is returned, not doubled).
func TestStartsDuringOutage(t *testing.T) {
	t.Parallel()
	for _, crash := range []bool{false, true} {
		name := "stopped"
		if crash {
			name = "crashed"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			startsAroundOutage(t, crash)
		})
	}
}

// startsAroundOutage is TestStartsDuringOutage with Postgres stopped, or
// crashed (immediate shutdown, then crash recovery).
func startsAroundOutage(t *testing.T, crash bool) {
	pg := pgtest.NewPrivate(t)
	env := []string{"THREADLINE_BUILTIN_DELAY=10ms", "THREADLINE_BUILTIN_TOKENS=100", longLease}
	rs := []*replica{startReplica(t, "replica0", pg.URL, env...), startReplica(t, "replica1", pg.URL, env...)}
	const n = 60
	starts := make([]*outageStart, n)
	launched := make(chan int, n)
	var wg sync.WaitGroup
	go func() {
		for i := range n {
			o := &outageStart{tid: uuid.NewString(), msgID: uuid.NewString(), r: rs[i%2]}
			o.body = message(o.msgID, fmt.Sprintf("start %d", i))
			starts[i] = o
			wg.Add(1)
			go func() { defer wg.Done(); o.send(t, o.r) }()
			launched <- i
			time.Sleep(15 * time.Millisecond)
		}
		close(launched)
	}()
	// Starts go on while Postgres goes down, is down and starts up again.
	for i := range launched {
		switch {
		case i == n/6 && crash:
			pg.Crash()
		case i == n/6:
			pg.Stop()
		case i == 2*n/3:
			pg.Start()
		}
	}
	wg.Wait()
	counts := map[int]int{}
	var refused []*outageStart
	for i, o := range starts {
		counts[o.code]++
		switch o.code {
		case http.StatusOK:
			o.check(t, fmt.Sprintf("acknowledged start %d on %s", i, o.r.name), o.r)
		case http.StatusServiceUnavailable:
			if !strings.Contains(o.answer, `"unavailable"`) {
				t.Fatalf("start %d on %s: 503 %s, want the unavailable error", i, o.r.name, o.answer)
			}
			refused = append(refused, o)
		default:
			t.Fatalf("start %d on %s: %d %s, want 200 or 503", i, o.r.name, o.code, o.answer)
		}
	}
	t.Logf("starts around the outage: %v", counts)
	if len(refused) == 0 || counts[http.StatusOK] == 0 {
		t.Fatalf("starts: %v, want both acknowledged and refused ones (the outage missed them)", counts)
	}
	// Each refused start is sent again, once, to the other replica:
	// Postgres is back, so it is served.
	for _, o := range refused {
		wg.Add(1)
		go func() { defer wg.Done(); o.send(t, rs[(slicesIndex(rs, o.r)+1)%2]) }()
	}
	wg.Wait()
	for i, o := range refused {
		if o.code != http.StatusOK {
			t.Fatalf("refused start %d sent again: %d %s, want 200", i, o.code, o.answer)
		}
		o.check(t, fmt.Sprintf("refused start %d sent again", i), o.r)
	}
	written := 0
	for _, r := range rs {
		written += strings.Count(r.log(), "a run whose start failed had been written")
	}
	t.Logf("refused starts whose run had been written all the same (recovered at once): %d", written)
}

// check checks an acknowledged start's stream and its thread on r: one
// final snapshot holding the user message, a replay on r equal to the
// stream, and the thread holding the message exactly once.
func (o *outageStart) check(t *testing.T, who string, r *replica) {
	t.Helper()
	final := checkRun(t, who, o.evs, 1, "")
	checkErrorBeforeFinal(t, who, o.evs)
	if got := reply(t, final); got != tokens(o.evs) {
		t.Fatalf("%s: final reply %q, want the streamed %q", who, got, tokens(o.evs))
	}
	if len(final.Messages) != 2 || final.Messages[0].ID != o.msgID {
		t.Fatalf("%s: acknowledged user message %s lost: final snapshot %s", who, o.msgID, final.Raw)
	}
	sameEvents(t, who+": replay on "+r.name, o.evs[1:], rejoin(t, r, o.tid, o.evs[0].RunID, 1).rest())
	code, body := call(t, http.MethodGet, r.url("/threads/"+o.tid+"/messages"), "")
	var snap struct {
		Repo struct {
			Messages []struct {
				Message struct{ ID, Role string } `json:"message"`
			} `json:"messages"`
		} `json:"messageRepository"`
		ActiveRun json.RawMessage `json:"active_run"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &snap) != nil {
		t.Fatalf("%s: thread on %s: %d %s", who, r.name, code, body)
	}
	users := 0
	for _, m := range snap.Repo.Messages {
		if m.Message.Role == "user" {
			users++
		}
	}
	if users != 1 || len(snap.Repo.Messages) != 2 || string(snap.ActiveRun) != "null" {
		t.Fatalf("%s: thread on %s holds %d user messages of %d, active run %s; want the one message %s, its reply and no active run",
			who, r.name, users, len(snap.Repo.Messages), snap.ActiveRun, o.msgID)
	}
}

func slicesIndex(rs []*replica, r *replica) int {
	for i, x := range rs {
		if x == r {
			return i
		}
	}
	return -1
}
