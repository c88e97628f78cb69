package engine_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/model/builtin"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
)

// builtinModels serves the built-in model with no delay.
type builtinModels struct{ m *builtin.Builtin }

func (b builtinModels) Resolve(string) (thread.Model, string, error) {
	return b.m, builtin.BuiltinName, nil
}
func (b builtinModels) List() []thread.ModelInfo { return nil }
func (b builtinModels) ContextBudget(string) int { return 0 }

// delays collects OnPublish's waits: how long the oldest token of each
// published batch waited for its group commit.
type delays struct {
	mu sync.Mutex
	d  []time.Duration
}

func (d *delays) add(wait time.Duration, _ int) {
	d.mu.Lock()
	d.d = append(d.d, wait)
	d.mu.Unlock()
}

func (d *delays) report(b *testing.B) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.d) == 0 {
		return
	}
	slices.Sort(d.d)
	q := func(p float64) float64 { return float64(d.d[int(p*float64(len(d.d)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-publish-ms")
	b.ReportMetric(q(0.99), "p99-publish-ms")
}

func benchService(b *testing.B, tokens int) (*engine.Service, *delays) {
	b.Helper()
	st := store.New(pgtest.Pool(b))
	d := &delays{}
	svc := engine.New(st, stream.New[thread.Event](1024), builtinModels{builtin.NewBuiltin(tokens, 0)}, st,
		engine.Config{OnPublish: d.add, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	svc.Start()
	shutdownAtCleanup(b, svc)
	return svc, d
}

// turn appends a 64-byte user message under parent and drains the run to
// its final (durable) snapshot; it returns the new leaf and the tokens read.
func turn(b *testing.B, svc *engine.Service, tid uuid.UUID, parent uuid.UUID) (uuid.UUID, int) {
	ctx := context.Background()
	r, _, err := svc.StartRun(ctx, "local", tid, thread.RunRequest{Message: msg(strings.Repeat("q", 64)), ParentID: parent})
	if err != nil {
		b.Fatalf("StartRun: %v", err)
	}
	n := 0
	var final *thread.Snapshot
	err = svc.FollowRun(ctx, "local", r, 0, func(ev thread.Event, _ bool) error {
		switch {
		case ev.Type == thread.KindToken:
			n++
		case ev.Final():
			final = ev.Snapshot
		}
		return nil
	})
	if err != nil || final == nil || final.RunStatus != thread.RunSucceeded {
		b.Fatalf("FollowRun: final %v err %v", final, err)
	}
	return r.MessageID, n
}

// BenchmarkTurn is one 200-token turn at the end of a thread of N turns:
// user message, model, log, reply, all durable. Every iteration appends
// under the N-th reply, so the path the model reads stays N turns long
// however many iterations run.
func BenchmarkTurn(b *testing.B) {
	for _, n := range []int{10, 100, 500} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			svc, d := benchService(b, 200)
			tid := uuid.New()
			var leaf uuid.UUID // uuid.Nil: the thread is empty
			for range n {
				leaf, _ = turn(b, svc, tid, leaf)
			}
			d.d = d.d[:0]
			b.ResetTimer()
			for b.Loop() {
				turn(b, svc, tid, leaf)
			}
			d.report(b)
		})
	}
}

// BenchmarkFreshTurn is a new conversation's first turn, on a thread id
// the service has never seen: the thread, the user message, the run and
// its reply in one write (bench peer's turn_ms starts with one such turn).
func BenchmarkFreshTurn(b *testing.B) {
	svc, d := benchService(b, 200)
	turn(b, svc, uuid.New(), uuid.Nil) // the pool's first connection
	d.d = d.d[:0]
	b.ResetTimer()
	for b.Loop() {
		turn(b, svc, uuid.New(), uuid.Nil)
	}
	d.report(b)
}

// BenchmarkFork regenerates the reply in the middle of a thread of N turns
// (a sibling of it, under the same user message), or with edit sends a new
// user message beside the one in the middle, and drains the run to its
// final, durable snapshot: what bench peer's fork_ms and edit_ms measure,
// repeated.
func BenchmarkFork(b *testing.B) {
	for _, c := range []struct {
		n    int
		edit bool
	}{{10, false}, {10, true}, {100, false}, {500, false}, {500, true}} {
		n := c.n
		name := fmt.Sprintf("N=%d", n)
		if c.edit {
			name = fmt.Sprintf("edit/N=%d", n)
		}
		b.Run(name, func(b *testing.B) {
			svc, _ := benchService(b, 200)
			tid := uuid.New()
			var leaf uuid.UUID
			var users []uuid.UUID
			for range n {
				leaf, _ = turn(b, svc, tid, leaf)
				snap, err := svc.Snapshot(context.Background(), "local", tid)
				if err != nil {
					b.Fatal(err)
				}
				users = append(users, snap.Tree.Get(leaf).ParentID)
			}
			mid := users[(n+1)/2-1]
			req := thread.RunRequest{ParentID: mid}
			if c.edit {
				snap, err := svc.Snapshot(context.Background(), "local", tid)
				if err != nil {
					b.Fatal(err)
				}
				req = thread.RunRequest{Message: msg(strings.Repeat("e", 64)), ParentID: snap.Tree.Get(mid).ParentID, SourceID: mid}
			}
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				r, _, err := svc.StartRun(ctx, "local", tid, req)
				if err != nil {
					b.Fatalf("StartRun: %v", err)
				}
				var final *thread.Snapshot
				if err := svc.FollowRun(ctx, "local", r, 0, func(ev thread.Event, _ bool) error {
					if ev.Final() {
						final = ev.Snapshot
					}
					return nil
				}); err != nil || final == nil || final.RunStatus != thread.RunSucceeded {
					b.Fatalf("FollowRun: final %v, err %v", final, err)
				}
			}
		})
	}
}

// BenchmarkStream is one run of 10,000 tokens through the log and the hub
// to one consumer; tokens/s is counted at the consumer.
func BenchmarkStream(b *testing.B) {
	const tokens = 10000
	svc, d := benchService(b, tokens)
	got := 0
	b.ResetTimer()
	for b.Loop() {
		_, n := turn(b, svc, uuid.New(), uuid.Nil)
		if n != tokens {
			b.Fatalf("consumer read %d tokens, want %d", n, tokens)
		}
		got += n
	}
	b.ReportMetric(float64(got)/b.Elapsed().Seconds(), "tokens/s")
	d.report(b)
}

// BenchmarkSnapshotJSON encodes a final snapshot event of a thread of N
// turns (2N messages, the path to the last one and the whole repository):
// what every run's stream sends twice.
func BenchmarkSnapshotJSON(b *testing.B) {
	for _, n := range []int{10, 100, 500} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			tid := uuid.New()
			var nodes []checkpoint.Node
			parent := uuid.Nil
			for i := range 2 * n {
				node := checkpoint.Node{ID: uuid.New(), ThreadID: tid, ParentID: parent, Seq: int64(i + 1), Role: checkpoint.RoleUser,
					Content: []checkpoint.Part{{Type: "text", Text: strings.Repeat("q", 64)}}, CreatedAt: time.Now().UTC()}
				if i%2 == 1 {
					node.Role, node.RunID = checkpoint.RoleAssistant, uuid.New()
					node.Content = []checkpoint.Part{{Type: "text", Text: strings.Repeat(" abcd", 200)}}
					node.Status = &checkpoint.Status{Type: "complete", Reason: "stop"}
				}
				nodes = append(nodes, node)
				parent = node.ID
			}
			tree, err := checkpoint.NewTree(nodes)
			if err != nil {
				b.Fatal(err)
			}
			ev := thread.Event{Type: thread.KindSnapshot, RunID: uuid.New(), Sequence: 202,
				Snapshot: &thread.Snapshot{ThreadID: tid, RunStatus: thread.RunSucceeded, Tree: tree, Head: parent}}
			b.ReportAllocs()
			var size int
			var out []byte
			for b.Loop() {
				out = wire.AppendEventLine(out[:0], &ev)
				size = len(out)
			}
			b.ReportMetric(float64(size), "bytes/event")
		})
	}
}

// BenchmarkSnapshot is get_state: the snapshot of a thread of N turns,
// cold (its tree not cached: every checkpoint read from Postgres) or
// cached (the thread row and the running run still read).
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{10, 500} {
		for _, cold := range []bool{true, false} {
			b.Run(fmt.Sprintf("N=%d/cold=%v", n, cold), func(b *testing.B) {
				svc, _ := benchService(b, 200)
				tid := uuid.New()
				var leaf uuid.UUID
				for range n {
					leaf, _ = turn(b, svc, tid, leaf)
				}
				ctx := context.Background()
				for b.Loop() {
					if cold {
						engine.Forget(svc, tid)
					}
					snap, err := svc.Snapshot(ctx, "local", tid)
					if err != nil || snap.Tree.Len() != 2*n {
						b.Fatalf("Snapshot: %v, want %d messages", err, 2*n)
					}
				}
			})
		}
	}
}
