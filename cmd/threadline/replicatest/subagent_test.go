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
	children := map[string]string{} // child thread -> child run
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

func anyKey(m map[string]string) string {
	for k := range m {
		return k
	}
	return ""
}
