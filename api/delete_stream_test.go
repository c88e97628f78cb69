package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestDeleteEndsStream: a thread deleted while its run streams ends the
// starting client's stream and a rejoined one with an error event
// not_found, one past the last event each received and with a message,
// not with a bare end of stream; a rejoin after the delete is a 404.
func TestDeleteEndsStream(t *testing.T) {
	t.Parallel()
	e := setup(t, withTokens(2000), withDelay(5*time.Millisecond))
	tid := newID()
	resp, r := e.openStream(context.Background(), tid, newMessage("doomed", nil))
	defer resp.Body.Close()
	live := []event{nextEvent(t, r), nextEvent(t, r), nextEvent(t, r)}
	runID := live[0].RunID
	rresp, rr := e.openRejoin(context.Background(), tid, runID, 1)
	defer rresp.Body.Close()
	rejoined := []event{nextEvent(t, rr)}
	dresp, body := e.do(http.MethodDelete, "/api/v1/threads/"+tid, nil)
	wantStatus(t, dresp, body, http.StatusNoContent, "")
	for _, s := range []struct {
		who string
		evs []event
	}{{"the starting client", append(live, readEvents(t, r)...)}, {"the rejoined client", append(rejoined, readEvents(t, rr)...)}} {
		last := s.evs[len(s.evs)-1]
		if last.Type != "error" || last.Code != "not_found" || last.Error == "" || last.RunID != runID {
			t.Fatalf("%s: last event %s, want an error not_found with a message", s.who, last.Raw)
		}
		for i := 1; i < len(s.evs); i++ {
			if s.evs[i].Sequence != s.evs[i-1].Sequence+1 {
				t.Fatalf("%s: sequence %d after %d", s.who, s.evs[i].Sequence, s.evs[i-1].Sequence)
			}
		}
	}
	again, ar := e.openRejoin(context.Background(), tid, runID, 1)
	defer again.Body.Close()
	if again.StatusCode != http.StatusNotFound {
		t.Fatalf("a rejoin after the delete: status %d %v, want 404", again.StatusCode, readEvents(t, ar))
	}
}
