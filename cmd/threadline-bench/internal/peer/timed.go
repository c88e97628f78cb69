package peer

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/cmd/threadline-bench/internal/bench"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/thread"
)

// timedStore counts and times the store calls a Service makes.
type timedStore struct {
	*store.Store
	mu  sync.Mutex
	ops map[string]*opStat
}

type opStat struct {
	n int
	d time.Duration
}

func (t *timedStore) since(op string, start time.Time) {
	d := time.Since(start)
	t.mu.Lock()
	s := t.ops[op]
	if s == nil {
		s = &opStat{}
		t.ops[op] = s
	}
	s.n++
	s.d += d
	t.mu.Unlock()
}

func (t *timedStore) reset() {
	t.mu.Lock()
	t.ops = map[string]*opStat{}
	t.mu.Unlock()
}

// perTurn returns each call's count and milliseconds per turn, and the
// rest of the turn's time (the service, the model and the hub).
func (t *timedStore) perTurn(turns int, totalMS float64) map[string]any {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]any{}
	var storeMS float64
	for op, s := range t.ops {
		out[op] = map[string]float64{"calls": bench.Round(float64(s.n)/float64(turns), 2), "ms": bench.Round(ms(s.d)/float64(turns), 3)}
		storeMS += ms(s.d)
	}
	out["store_ms"] = bench.Round(storeMS/float64(turns), 3)
	out["turn_mean_ms"] = bench.Round(totalMS/float64(turns), 3)
	return out
}

func fmtBreakdown(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		switch v := m[k].(type) {
		case map[string]float64:
			parts = append(parts, fmt.Sprintf("%s %.2g× %.3f", k, v["calls"], v["ms"]))
		case float64:
			parts = append(parts, fmt.Sprintf("%s %.3f", k, v))
		}
	}
	return strings.Join(parts, ", ")
}

func (t *timedStore) ThreadGet(ctx context.Context, caller string, id uuid.UUID) (*thread.Thread, error) {
	defer t.since("ThreadGet", time.Now())
	return t.Store.ThreadGet(ctx, caller, id)
}

func (t *timedStore) ThreadUpdate(ctx context.Context, caller string, id uuid.UUID, u thread.ThreadUpdate) (*thread.Thread, error) {
	defer t.since("ThreadUpdate", time.Now())
	return t.Store.ThreadUpdate(ctx, caller, id, u)
}

func (t *timedStore) CheckpointsAfter(ctx context.Context, threadID uuid.UUID, after int64) ([]checkpoint.Node, error) {
	defer t.since("CheckpointsAfter", time.Now())
	return t.Store.CheckpointsAfter(ctx, threadID, after)
}

func (t *timedStore) RunCreate(ctx context.Context, in thread.RunCreate, first thread.Record) (*thread.Run, error) {
	defer t.since("RunCreate", time.Now())
	return t.Store.RunCreate(ctx, in, first)
}

func (t *timedStore) RunComplete(ctx context.Context, in thread.RunCreate, fin thread.RunFinish) error {
	defer t.since("RunComplete", time.Now())
	return t.Store.RunComplete(ctx, in, fin)
}

func (t *timedStore) RunGet(ctx context.Context, threadID, runID uuid.UUID) (*thread.Run, error) {
	defer t.since("RunGet", time.Now())
	return t.Store.RunGet(ctx, threadID, runID)
}

func (t *timedStore) RunActive(ctx context.Context, threadID uuid.UUID) (*thread.Run, error) {
	defer t.since("RunActive", time.Now())
	return t.Store.RunActive(ctx, threadID)
}

func (t *timedStore) RunEventsAppend(ctx context.Context, segs []thread.Segment) error {
	defer t.since("RunEventsAppend", time.Now())
	return t.Store.RunEventsAppend(ctx, segs)
}

func (t *timedStore) RunEventsAfter(ctx context.Context, runID uuid.UUID, after int64) ([]thread.Record, error) {
	defer t.since("RunEventsAfter", time.Now())
	return t.Store.RunEventsAfter(ctx, runID, after)
}

func (t *timedStore) RunFinish(ctx context.Context, in thread.RunFinish) error {
	defer t.since("RunFinish", time.Now())
	return t.Store.RunFinish(ctx, in)
}

func (t *timedStore) ThreadRead(ctx context.Context, caller string, id uuid.UUID, after int64) (*thread.Thread, []checkpoint.Node, *thread.Run, error) {
	defer t.since("ThreadRead", time.Now())
	return t.Store.ThreadRead(ctx, caller, id, after)
}

func (t *timedStore) RunFinishAll(ctx context.Context, ins []thread.RunFinish) error {
	defer t.since("RunFinishAll", time.Now())
	return t.Store.RunFinishAll(ctx, ins)
}
