package replicatest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestKill9Subagents: a replica killed with SIGKILL while its run's three
// sub-agents stream has every run recovered by another replica: the
// parent and each child end interrupted with a final snapshot, seen from
// the other replica (the parent's stream, and each child's own), and the
// parent's and a child's threads then take new runs.
func TestKill9Subagents(t *testing.T) {
	t.Parallel()
	_, rs := cluster(t, 2, "THREADLINE_BUILTIN_DELAY=40ms", longLease)
	owner, other := rs[0], rs[1]
	tid := uuid.NewString()
	live := startRun(t, owner, tid, `{"message":{"content":"Research three options in parallel"},"run_config":{"model":"builtin:demo"}}`)
	first := live.readN(1)[0]
	watch := followWithin(t, other, tid, first.RunID, 0, recoveryBound)
	children := streamingChildren(t, live)
	owner.kill9()
	got := watch.rest()
	checkRun(t, "the parent, followed on "+other.name, got, 1, "interrupted")
	for child, run := range children {
		evs := follow(t, other, child, run, 0).rest()
		final := checkRun(t, "child "+child+" on "+other.name, evs, 1, "interrupted")
		if len(final.Messages) < 2 || !strings.HasPrefix(final.Messages[0].Content[0].Text, "Look into ") {
			t.Fatalf("child %s: final snapshot %s, want its task and its reply", child, final.Raw)
		}
		code, body := call(t, http.MethodGet, other.url(fmt.Sprintf("/threads/%s/runs/%s", child, run)), "")
		if code != 200 || !strings.Contains(body, `"status":"interrupted"`) {
			t.Fatalf("child run %s on %s: %d %s, want interrupted", run, other.name, code, body)
		}
	}
	for _, th := range []string{tid, anyKey(children)} {
		again := startRun(t, other, th, `{"message":{"content":"What is 2+2?"},"run_config":{"model":"builtin:demo"}}`).rest()
		checkRun(t, "a new run on "+th, again, 1, "succeeded")
	}
}

// TestCancelSubagentsElsewhere: a cancel of the parent sent to another
// replica than the one running it cancels every child: each ends
// cancelled with its final snapshot, and the parent's calls answer
// is_error.
func TestCancelSubagentsElsewhere(t *testing.T) {
	t.Parallel()
	_, rs := cluster(t, 2, "THREADLINE_BUILTIN_DELAY=40ms")
	owner, other := rs[0], rs[1]
	tid := uuid.NewString()
	live := startRun(t, owner, tid, `{"message":{"content":"Research three options in parallel"},"run_config":{"model":"builtin:demo"}}`)
	children := streamingChildren(t, live)
	code, body := call(t, http.MethodPost, other.url(fmt.Sprintf("/threads/%s/runs/%s/cancel", tid, live.evs[0].RunID)), "")
	if code != http.StatusAccepted {
		t.Fatalf("cancel on %s: %d %s", other.name, code, body)
	}
	final := checkRun(t, "the parent", live.rest(), 1, "cancelled")
	calls := 0
	for _, p := range final.LastMessage().Content {
		if p.ToolName == "delegate" && p.IsError && p.Subagent != nil && children[p.Subagent.ThreadID] == p.Subagent.RunID {
			calls++
		}
	}
	if calls != 3 {
		t.Fatalf("the parent's calls: final snapshot %s, want three delegate calls naming their children, answered is_error", final.Raw)
	}
	for child, run := range children {
		checkRun(t, "child "+child+" on "+other.name, follow(t, other, child, run, 0).rest(), 1, "cancelled")
	}
}

// streamingChildren reads the parent's stream until three children
// have streamed a token, and returns them (child thread -> child run).
func streamingChildren(t *testing.T, live *stream) map[string]string {
	t.Helper()
	live.readN(1)
	children := map[string]string{}
	streaming := map[string]bool{}
	for len(streaming) < 3 {
		ev, ok := live.next()
		if !ok {
			t.Fatalf("the parent's stream ended before three children streamed: %d", len(streaming))
		}
		if ev.Type == "subagent" {
			children[ev.ThreadID] = ev.ChildRunID
			if ev.Event != nil && ev.Event.Type == "token" {
				streaming[ev.ThreadID] = true
			}
		}
	}
	return children
}

func anyKey(m map[string]string) string {
	for k := range m {
		return k
	}
	return ""
}
