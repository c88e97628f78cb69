package engine

import (
	"sync"

	"github.com/google/uuid"

	"github.com/threadline/threadline/thread"
)

// registry is the runs this process owns, by id and by thread (at most
// one a thread), and whether it still takes new ones, under a lock of its
// own: the tree cache and the engine's services never wait on it.
type registry struct {
	mu       sync.Mutex
	runs     map[uuid.UUID]*activeRun
	byThread map[uuid.UUID]*activeRun
	closing  bool
	// done counts the runs whose goroutine has not returned.
	done sync.WaitGroup
}

func newRegistry() *registry {
	return &registry{runs: make(map[uuid.UUID]*activeRun), byThread: make(map[uuid.UUID]*activeRun)}
}

// add registers ar as its run's and its thread's, and counts it in done.
// It returns ErrShuttingDown once close was called (checked under the
// lock close takes: a run either is counted before Shutdown waits, or
// never starts), and a *threadBusy when the thread has a run here.
func (g *registry) add(ar *activeRun) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return ErrShuttingDown
	}
	if other := g.byThread[ar.run.ThreadID]; other != nil {
		return &threadBusy{ar: other}
	}
	g.runs[ar.run.ID] = ar
	g.byThread[ar.run.ThreadID] = ar
	g.done.Add(1)
	return nil
}

// remove forgets the run once its goroutine is done with it (which then
// marks itself done).
func (g *registry) remove(runID uuid.UUID) {
	g.mu.Lock()
	delete(g.runs, runID)
	g.mu.Unlock()
}

// leave marks r's thread free of r (a later run of the thread is not
// touched).
func (g *registry) leave(r *thread.Run) {
	g.mu.Lock()
	if ar := g.byThread[r.ThreadID]; ar != nil && ar.run == r {
		delete(g.byThread, r.ThreadID)
	}
	g.mu.Unlock()
}

// get returns the run if this process runs it, else nil.
func (g *registry) get(runID uuid.UUID) *activeRun {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runs[runID]
}

// onThread returns the caller's thread's run here, or nil.
func (g *registry) onThread(caller string, threadID uuid.UUID) *activeRun {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ar := g.byThread[threadID]; ar != nil && ar.thread.Caller == caller {
		return ar
	}
	return nil
}

// all returns the runs here now.
func (g *registry) all() []*activeRun {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*activeRun, 0, len(g.runs))
	for _, ar := range g.runs {
		out = append(out, ar)
	}
	return out
}

// count returns how many runs are here, and how many of them are the
// caller's.
func (g *registry) count(caller string) (total, callers int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, ar := range g.runs {
		if ar.thread.Caller == caller {
			callers++
		}
	}
	return len(g.runs), callers
}

// close refuses new runs from now on.
func (g *registry) close() {
	g.mu.Lock()
	g.closing = true
	g.mu.Unlock()
}

// closed reports whether close was called.
func (g *registry) closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closing
}
