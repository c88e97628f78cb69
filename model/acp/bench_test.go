package acp_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/model/acp"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
	"github.com/threadline/threadline/thread/threadtest"
)

// BenchmarkUpdateLatency measures how long an agent_message_chunk takes
// from the agent's write to its stdout to where the service hands it on:
// "model" to Agent.Stream's onDelta (the pipe, the tap, the SDK and
// the mapping), "engine" to a follower of the run (FollowRun's callback,
// what the API writes to a client's stream) through the engine's log and
// publication on the in-memory store. One run of b.N chunks, one every
// 500µs; p50 and p99 are reported in microseconds.
func BenchmarkUpdateLatency(b *testing.B) {
	b.Run("model", func(b *testing.B) {
		a := acp.New("bench", acp.AgentConfig{Command: os.Args[0], Cwd: b.TempDir(),
			Env: map[string]string{"ACPTEST_MODE": "bench", "ACPTEST_N": strconv.Itoa(b.N)}}, os.Getenv, nil)
		defer a.Close()
		var lat []time.Duration
		b.ResetTimer()
		_, err := a.Stream(context.Background(), thread.ModelRequest{Messages: []thread.ModelMessage{{Role: "user", Parts: []thread.ModelPart{{Type: "text", Text: "go"}}}}},
			func(d thread.Delta) error {
				lat = append(lat, since(d.Text))
				return nil
			})
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		report(b, lat)
	})
	b.Run("engine", func(b *testing.B) {
		dir := b.TempDir()
		path := filepath.Join(dir, "agents.json")
		cfg := `{"agents":{"bench":{"command":"` + os.Args[0] + `","cwd":"` + dir + `","env":{"ACPTEST_MODE":"bench","ACPTEST_N":"` + strconv.Itoa(b.N) + `"}}}}`
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			b.Fatal(err)
		}
		reg := registryAt(b, path)
		svc := engine.New(threadtest.New(), stream.New[thread.Event](4096), reg, nil, engine.Config{StartLinger: -1})
		svc.Start()
		defer func() { svc.Shutdown(context.Background()); reg.Stop() }()
		b.ResetTimer()
		r, _, err := svc.StartRun(context.Background(), "local", uuid.New(), ask("bench", "go"))
		if err != nil {
			b.Fatal(err)
		}
		var lat []time.Duration
		err = svc.FollowRun(context.Background(), "local", r, 0, func(ev thread.Event, _ bool) error {
			if ev.Type == thread.KindToken {
				lat = append(lat, since(ev.Text))
			}
			return nil
		})
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		report(b, lat)
	})
}

func since(text string) time.Duration {
	ns, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
	if err != nil {
		return -1
	}
	return time.Since(time.Unix(0, ns))
}

func report(b *testing.B, lat []time.Duration) {
	if len(lat) != b.N {
		b.Fatalf("got %d updates, want %d", len(lat), b.N)
	}
	slices.Sort(lat)
	if lat[0] < 0 {
		b.Fatal("an update's text was not its send time")
	}
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
