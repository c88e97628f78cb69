package floor

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/model/builtin"
	"github.com/threadline/threadline/stream"
)

// TestFloorStreamCatchesUpAfterLag gives the floor a one-batch buffer and
// a model with no delay, so a subscriber falls behind and is dropped; the
// stream must still carry every event once, in order, with tokens
// published one or two at a time.
func TestFloorStreamCatchesUpAfterLag(t *testing.T) {
	t.Parallel()
	for _, pairs := range []bool{false, true} {
		t.Run(fmt.Sprintf("pairs=%v", pairs), func(t *testing.T) {
			t.Parallel()
			f := &floorServer{model: builtin.NewBuiltin(500, 0), hub: stream.New[floorEvent](1), runs: map[uuid.UUID]*floorRun{}, pairs: pairs}
			checkFloorStream(t, f)
		})
	}
}

// TestFloorPairs checks what a subscriber of a run receives with pairs on:
// every token in a batch of two, then the final event.
func TestFloorPairs(t *testing.T) {
	t.Parallel()
	f := &floorServer{model: builtin.NewBuiltin(7, 0), hub: stream.New[floorEvent](64), runs: map[uuid.UUID]*floorRun{}, pairs: true}
	run := &floorRun{id: uuid.New(), msg: uuid.New(), events: []floorEvent{{seq: 1}}}
	sub := f.hub.Subscribe(run.id)
	defer sub.Close()
	f.execute(run, "pairs")
	var got []int
	for batch := range sub.C() {
		got = append(got, len(batch))
	}
	// Seven tokens: three pairs, then the seventh with the final event.
	if want := []int{2, 2, 2, 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("batch sizes %v, want %v", got, want)
	}
}

func checkFloorStream(t *testing.T, f *floorServer) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/threads/{thread_id}/runs/stream", f.start)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/api/v1/threads/"+uuid.NewString()+"/runs/stream", "application/json",
		strings.NewReader(`{"message":{"content":"lag"}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var seq int64
	var text strings.Builder
	final := ""
	for sc.Scan() {
		var ev wire.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if ev.Sequence != seq+1 {
			t.Fatalf("sequence %d after %d, want %d", ev.Sequence, seq, seq+1)
		}
		seq = ev.Sequence
		if ev.Type == "token" {
			text.WriteString(ev.Text)
		}
		if ev.RunStatus == "succeeded" {
			final = ev.Messages[0].Content[0].Text
		}
	}
	if got, want := seq, int64(502); got != want {
		t.Errorf("last sequence %d, want %d", got, want)
	}
	if want := builtin.BuiltinText("lag", 1, 500); text.String() != want || final != want {
		t.Errorf("streamed %d bytes, final snapshot %d bytes; want both equal to the model's %d", text.Len(), len(final), len(want))
	}
}
