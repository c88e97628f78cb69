package starter

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine/internal/runner"
	"github.com/threadline/threadline/thread/engine/internal/trees"
	"github.com/threadline/threadline/thread/threadtest"
)

// gated answers "ok" once its gate is closed.
type gated struct{ gate chan struct{} }

func (m gated) Stream(ctx context.Context, _ thread.ModelRequest, on func(thread.Delta) error) (thread.ModelResult, error) {
	select {
	case <-m.gate:
	case <-ctx.Done():
		return thread.ModelResult{}, ctx.Err()
	}
	return thread.ModelResult{StopReason: "stop"}, on(thread.Delta{Kind: thread.DeltaText, Text: "ok"})
}

type models struct{ m thread.Model }

func (ms models) Resolve(name string) (thread.Model, string, error) {
	if name != "" && name != "gated" {
		return nil, "", errcode.New(errcode.Invalid, "unknown model %q", name)
	}
	return ms.m, "gated", nil
}
func (models) List() []thread.ModelInfo { return []thread.ModelInfo{{Name: "gated"}} }
func (models) ContextBudget(string) int { return 0 }

type fixture struct {
	st   *threadtest.Store
	s    *Starter
	gate chan struct{}
}

func setup(t *testing.T, limits Limits) *fixture {
	t.Helper()
	st, hub := threadtest.New(), stream.New[thread.Event](64)
	gate := make(chan struct{})
	ms := models{m: gated{gate: gate}}
	tc, active := trees.New(st, 16), runner.NewRegistry()
	rn := runner.New(st, hub, ms, tc, active, slog.New(slog.DiscardHandler), runner.Config{Owner: "test", Lease: time.Minute,
		Now: time.Now, StartLinger: -1, RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond})
	rn.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rn.Drain(ctx)
		rn.Stop()
	})
	s := New(st, hub, ms, nil, tc, active, rn, Config{Owner: "test", Lease: time.Minute, Now: time.Now, Limits: limits})
	return &fixture{st: st, s: s, gate: gate}
}

var noLimits = Limits{RunsPerCaller: -1, RunsPerProcess: -1, MessagesPerThread: -1, InlineBytes: 1 << 20}

func message(id uuid.UUID, text string) thread.RunRequest {
	return thread.RunRequest{Message: &thread.UserMessage{ID: id, Content: []checkpoint.Part{{Type: checkpoint.PartText, Text: text}}}}
}

// TestStartNewThread: a first message on an unknown thread id creates the
// thread with the run's start, which is durable when Start returns; the
// same message again gets that run (existing); other content under the
// same id is a conflict, and another message while it runs is
// run_in_progress naming it.
func TestStartNewThread(t *testing.T) {
	t.Parallel()
	x := setup(t, noLimits)
	ctx := context.Background()
	tid, mid := uuid.New(), uuid.New()
	r, existing, err := x.s.Start(ctx, "alice", tid, message(mid, "hi"))
	if err != nil || existing {
		t.Fatalf("Start: existing %v, err %v", existing, err)
	}
	if got, err := x.st.RunGet(ctx, tid, r.ID); err != nil || got.Status != thread.RunRunning || got.UserMessageID != mid {
		t.Fatalf("stored run: got %+v (%v), want it running with the message", got, err)
	}
	again, existing, err := x.s.Start(ctx, "alice", tid, message(mid, "hi"))
	if err != nil || !existing || again.ID != r.ID {
		t.Fatalf("the same message again: got %v existing %v (%v), want run %s existing", again, existing, err, r.ID)
	}
	tests := []struct {
		name string
		req  thread.RunRequest
		want errcode.Code
	}{
		{"other content", message(mid, "bye"), errcode.Conflict},
		{"another message", message(uuid.New(), "more"), errcode.RunInProgress},
		{"unknown model", thread.RunRequest{Message: message(uuid.New(), "x").Message, Config: thread.RunConfig{Model: "nope"}}, errcode.Invalid},
	}
	for _, tt := range tests {
		if _, _, err := x.s.Start(ctx, "alice", tid, tt.req); errcode.Of(err) != tt.want {
			t.Fatalf("%s: got %v, want %s", tt.name, err, tt.want)
		}
	}
	if _, _, err := x.s.Start(ctx, "bob", tid, message(uuid.New(), "mine?")); errcode.Of(err) != errcode.NotFound {
		t.Fatalf("another caller's thread: got %v, want not_found", err)
	}
	close(x.gate)
}

// TestStartLimits: a caller over its runs is refused rate_limited, and
// nothing of the refused run is written.
func TestStartLimits(t *testing.T) {
	t.Parallel()
	lim := noLimits
	lim.RunsPerCaller = 1
	x := setup(t, lim)
	ctx := context.Background()
	if _, _, err := x.s.Start(ctx, "alice", uuid.New(), message(uuid.New(), "one")); err != nil {
		t.Fatal(err)
	}
	tid := uuid.New()
	if _, _, err := x.s.Start(ctx, "alice", tid, message(uuid.New(), "two")); errcode.Of(err) != errcode.RateLimited {
		t.Fatalf("a second run: got %v, want rate_limited", err)
	}
	if _, err := x.st.ThreadGet(ctx, "alice", tid); errcode.Of(err) != errcode.NotFound {
		t.Fatalf("the refused run's thread: got %v, want not_found", err)
	}
	close(x.gate)
}
