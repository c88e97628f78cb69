package runner

import (
	"context"

	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine/internal/batch"
)

// The service writes runs' starts and ends through batchers of the engine
// (batch.Batcher): starts whose linger ran out, and ends of runs whose
// start was written alone, go to the store together when they arrive
// together.

// startReq is a run's start for the starts batcher.
type startReq struct {
	in    thread.RunCreate
	first thread.Record
}

// newStarts batches the starts of runs whose linger ran out
// (Store.RunCreateAll).
func newStarts(st thread.Store) *batch.Batcher[startReq] {
	return batch.NewBatcher(func(ctx context.Context, rs []startReq) error {
		ins, firsts := make([]thread.RunCreate, len(rs)), make([]thread.Record, len(rs))
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
func newEnds(st thread.Store) *batch.Batcher[thread.RunFinish] {
	return batch.NewBatcher(func(ctx context.Context, ins []thread.RunFinish) error {
		return st.RunFinishAll(ctx, ins)
	}, func(ctx context.Context, in thread.RunFinish) error {
		return st.RunFinish(ctx, in)
	}, retryable)
}
