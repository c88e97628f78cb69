package store

import (
	"sync"

	"github.com/google/uuid"
)

// runFence is what this process knows of run_fence (migration 0013): for
// each run it appended for, the count of claims taken and running runs
// deleted at which that run's claim was last checked. An append passes
// the counts, and Postgres checks again only the runs whose count moved
// since, instead of every run of every commit.
type runFence struct {
	mu   sync.Mutex
	seen map[uuid.UUID]int64
}

// maxFenceSeen bounds runFence: when full it starts again empty (the next
// append of each run then checks its claim again).
const maxFenceSeen = 1 << 16

// neverChecked is the count of a run never checked here: counts start at
// 0, so it differs from every one.
const neverChecked = -1

// counts returns the count each run was last checked at, neverChecked for
// a run never checked here. (Not NULLs: a []*int64 costs pgx an
// allocation and a reflection per element.)
func (f *runFence) counts(ids []uuid.UUID) []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]int64, len(ids))
	for i, id := range ids {
		if gen, ok := f.seen[id]; ok {
			out[i] = gen
		} else {
			out[i] = neverChecked
		}
	}
	return out
}

// checked records that an append of ids was accepted at count gen.
func (f *runFence) checked(ids []uuid.UUID, gen int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil || len(f.seen)+len(ids) > maxFenceSeen {
		f.seen = make(map[uuid.UUID]int64, len(ids))
	}
	for _, id := range ids {
		f.seen[id] = gen
	}
}

// forget drops runs that ended or lost their claim.
func (f *runFence) forget(ids ...uuid.UUID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		delete(f.seen, id)
	}
}
