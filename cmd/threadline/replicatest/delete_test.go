package replicatest

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
)

// TestDeleteEndsEveryStream: a thread deleted while its run streams, on
// the run's replica or on another, ends every stream of the run on every
// replica (the starting client's, a follower from the start and a
// rejoined client on each replica) with an error event not_found that
// carries a message and the sequence after the last event that stream
// delivered, never with a bare end of stream, which a client cannot tell
// from a network failure; a rejoin afterwards is a 404.
func TestDeleteEndsEveryStream(t *testing.T) {
	t.Parallel()
	_, rs := cluster(t, 3, "THREADLINE_BUILTIN_DELAY=10ms", "THREADLINE_BUILTIN_TOKENS=3000", longLease)
	for _, tc := range []struct {
		name    string
		deleter *replica
	}{{"on the owner", rs[0]}, {"on another replica", rs[1]}} {
		tid := uuid.NewString()
		live := startRun(t, rs[0], tid, message("", "delete me "+tc.name))
		runID := live.readN(3)[0].RunID
		streams := map[string]*stream{"the starting client on " + rs[0].name: live}
		for _, r := range rs {
			streams["a follower on "+r.name] = follow(t, r, tid, runID, 0)
			streams["a rejoined client on "+r.name] = follow(t, r, tid, runID, 2)
		}
		for _, s := range streams {
			s.readN(len(s.evs) + 1) // live on every replica
		}
		if code, body := call(t, http.MethodDelete, tc.deleter.url("/threads/"+tid), ""); code != http.StatusNoContent {
			t.Fatalf("%s: delete: %d %s, want 204", tc.name, code, body)
		}
		for who, s := range streams {
			evs := s.rest()
			last := evs[len(evs)-1]
			if last.Type != "error" || last.Code != "not_found" || last.Error == "" || last.RunID != runID {
				t.Fatalf("delete %s: %s's stream ended with %s, want an error not_found with a message", tc.name, who, last.Raw)
			}
			for i := 1; i < len(evs); i++ {
				if evs[i].Sequence != evs[i-1].Sequence+1 {
					t.Fatalf("delete %s: %s got sequence %d after %d", tc.name, who, evs[i].Sequence, evs[i-1].Sequence)
				}
			}
		}
		for _, r := range rs {
			req, _ := http.NewRequest(http.MethodGet, r.url("/threads/"+tid+"/runs/"+runID+"/stream?after=1"), nil)
			if s, code, _ := openStream(t, req); s != nil || code != http.StatusNotFound {
				t.Fatalf("delete %s: a rejoin on %s afterwards: status %d, want 404", tc.name, r.name, code)
			}
		}
	}
}
