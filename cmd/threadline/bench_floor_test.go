package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/model"
	"github.com/threadline/threadline/stream"
)

// TestBenchLoadFloor runs `bench load --floor` for real on a small size:
// the in-memory floor as a child, clients that drop and rejoin. No
// database is involved, so the database figures are absent.
func TestBenchLoadFloor(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a child process")
	}
	bin := binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"--floor", "--k", "6", "--tokens", "30", "--rate", "300", "--rejoin-share", "0.5", "--ramp", "100ms",
		"--rejoin-pause", "20ms", "--timeout", "1m", "--server-bin", bin}
	if err := benchLoad(ctx, args, func(string) string { return "" }, &stdout, &stderr); err != nil {
		t.Fatalf("bench load --floor: %v\nstderr:\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var r LoadResult
	if err := json.Unmarshal([]byte(lines[0]), &r); err != nil {
		t.Fatalf("first line: %v\n%s", err, lines[0])
	}
	if r.RunsCompleted != 6 || r.RunsFailed != 0 || !r.ExactlyOnce || r.TokensDelivered != 180 {
		t.Errorf("completed, failed, exactly_once, delivered = %d, %d, %v, %d; want 6, 0, true, 180; errors: %v",
			r.RunsCompleted, r.RunsFailed, r.ExactlyOnce, r.TokensDelivered, r.Errors)
	}
	if got, want := r.Rejoined, 3; got != want {
		t.Errorf("rejoined = %d, want %d", got, want)
	}
	if !strings.Contains(r.Target, "bench floor") {
		t.Errorf("target = %q, want it to name bench floor", r.Target)
	}
	if r.DBGrowthBytes != nil || r.DBBackendCPUS != nil {
		t.Errorf("db_growth_bytes, db_backend_cpu_s = %v, %v; want none for the floor", r.DBGrowthBytes, r.DBBackendCPUS)
	}
}

// TestFloorStreamCatchesUpAfterLag gives the floor a one-batch buffer and
// a model with no delay, so a subscriber falls behind and is dropped; the
// stream must still carry every event once, in order.
func TestFloorStreamCatchesUpAfterLag(t *testing.T) {
	t.Parallel()
	f := &floorServer{model: model.NewBuiltin(500, 0), hub: stream.New[floorEvent](1), runs: map[uuid.UUID]*floorRun{}}
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
		var ev loadEvent
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
			final = ev.Messages[0].text()
		}
	}
	if got, want := seq, int64(502); got != want {
		t.Errorf("last sequence %d, want %d", got, want)
	}
	if want := model.BuiltinText("lag", 1, 500); text.String() != want || final != want {
		t.Errorf("streamed %d bytes, final snapshot %d bytes; want both equal to the model's %d", text.Len(), len(final), len(want))
	}
}
