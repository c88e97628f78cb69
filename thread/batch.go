package thread

import (
	"context"

	"github.com/threadline/threadline/thread/engine"
)

// The service writes runs' starts and ends through batchers of the engine
// (engine.Batcher): starts whose linger ran out, and ends of runs whose
// start was written alone, go to the store together when they arrive
// together.

// startReq is a run's start for the starts batcher.
type startReq struct {
	in    RunCreate
	first Record
}

// newStarts batches the starts of runs whose linger ran out
// (Store.RunCreateAll).
func newStarts(st Store) *engine.Batcher[startReq] {
	return engine.NewBatcher(func(ctx context.Context, rs []startReq) error {
		ins, firsts := make([]RunCreate, len(rs)), make([]Record, len(rs))
		for i, r := range rs {
			ins[i], firsts[i] = r.in, r.first
		}
		return st.RunCreateAll(ctx, ins, firsts)
	}, func(ctx context.Context, r startReq) error {
		_, err := st.RunCreate(ctx, r.in, r.first)
		return err
	}, retryable)
}

// newEnds batches the ends of runs whose start was written alone
// (Store.RunFinishAll): the runs that started together in a burst end
// together too.
func newEnds(st Store) *engine.Batcher[RunFinish] {
	return engine.NewBatcher(func(ctx context.Context, ins []RunFinish) error {
		return st.RunFinishAll(ctx, ins)
	}, func(ctx context.Context, in RunFinish) error {
		return st.RunFinish(ctx, in)
	}, retryable)
}
