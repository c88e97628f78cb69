package runner

import (
	"sync"

	"github.com/google/uuid"

	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine/internal/follow"
	"github.com/threadline/threadline/thread/engine/internal/runlog"
)

// Registry is the runs this process owns, by id and by thread (at most
// one a thread), and whether it still takes new ones, under a lock of its
// own: the tree cache and the engine's services never wait on it.
type Registry struct {
	mu       sync.Mutex
	runs     map[uuid.UUID]*Active
	byThread map[uuid.UUID]*Active
	// perCaller counts runs by their thread's caller, so that a start's
	// limit check does not walk every run.
	perCaller map[string]int
	closing   bool
	// firsts are the runs' first subscriptions, made before their first
	// event, for their starter's follow to claim once (First): it then
	// needs no catch-up read of the log. The hub's End closes one that
	// nobody claims.
	firsts map[uuid.UUID]stream.Subscription[thread.Event]
	// done counts the runs whose goroutine has not returned.
	done sync.WaitGroup
}

func NewRegistry() *Registry {
	return &Registry{runs: make(map[uuid.UUID]*Active), byThread: make(map[uuid.UUID]*Active),
		perCaller: make(map[string]int), firsts: make(map[uuid.UUID]stream.Subscription[thread.Event])}
}

// add registers ar as its run's and its thread's, and counts it in done.
// It returns runlog.ErrShuttingDown once close was called (checked under the
// lock close takes: a run either is counted before Shutdown waits, or
// never starts), and a *ThreadBusy when the thread has a run here.
func (g *Registry) add(ar *Active) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return runlog.ErrShuttingDown
	}
	if other := g.byThread[ar.run.ThreadID]; other != nil {
		return &ThreadBusy{Active: other}
	}
	g.runs[ar.run.ID] = ar
	g.byThread[ar.run.ThreadID] = ar
	g.perCaller[ar.thread.Caller]++
	g.done.Add(1)
	return nil
}

// remove forgets the run once its goroutine is done with it (which then
// marks itself done).
func (g *Registry) remove(runID uuid.UUID) {
	g.mu.Lock()
	if ar := g.runs[runID]; ar != nil {
		delete(g.runs, runID)
		if g.perCaller[ar.thread.Caller]--; g.perCaller[ar.thread.Caller] <= 0 {
			delete(g.perCaller, ar.thread.Caller)
		}
	}
	g.mu.Unlock()
}

// leave marks r's thread free of r (a later run of the thread is not
// touched).
func (g *Registry) leave(r *thread.Run) {
	g.mu.Lock()
	if ar := g.byThread[r.ThreadID]; ar != nil && ar.run == r {
		delete(g.byThread, r.ThreadID)
	}
	g.mu.Unlock()
}

// get returns the run if this process runs it, else nil.
func (g *Registry) Get(runID uuid.UUID) *Active {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runs[runID]
}

// onThread returns the caller's thread's run here, or nil.
func (g *Registry) OnThread(caller string, threadID uuid.UUID) *Active {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ar := g.byThread[threadID]; ar != nil && ar.thread.Caller == caller {
		return ar
	}
	return nil
}

// all returns the runs here now.
func (g *Registry) All() []*Active {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*Active, 0, len(g.runs))
	for _, ar := range g.runs {
		out = append(out, ar)
	}
	return out
}

// count returns how many runs are here, and how many of them are the
// caller's.
func (g *Registry) Count(caller string) (total, callers int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.runs), g.perCaller[caller]
}

// close refuses new runs from now on.
func (g *Registry) Close() {
	g.mu.Lock()
	g.closing = true
	g.mu.Unlock()
}

// closed reports whether close was called.
func (g *Registry) Closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closing
}

var _ follow.Local = (*Registry)(nil)

// Runs reports whether this process runs the run.
func (g *Registry) Runs(runID uuid.UUID) bool { return g.Get(runID) != nil }

// Log returns the durable records after sequence after of a run this
// process runs, and whether they are its whole log; ok false when it runs
// no such run.
func (g *Registry) Log(runID uuid.UUID, after int64) (recs []thread.Record, ended, ok bool) {
	ar := g.Get(runID)
	if ar == nil {
		return nil, false, false
	}
	recs, ended = ar.log.After(after)
	return recs, ended, true
}

// keepFirst keeps sub as the run's first subscription for First. The
// unclaimed ones of ended runs (a starter that did not follow) are
// dropped once they outnumber the runs: their hub's End closed them.
func (g *Registry) KeepFirst(runID uuid.UUID, sub stream.Subscription[thread.Event]) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.firsts) > 2*len(g.runs)+64 {
		for id := range g.firsts {
			if g.runs[id] == nil {
				delete(g.firsts, id)
			}
		}
	}
	g.firsts[runID] = sub
}

// First claims the run's first subscription: nil when there is none or
// it was claimed.
func (g *Registry) First(runID uuid.UUID) stream.Subscription[thread.Event] {
	g.mu.Lock()
	defer g.mu.Unlock()
	sub := g.firsts[runID]
	delete(g.firsts, runID)
	return sub
}

// dropFirst closes the run's first subscription if nobody claimed it (a
// start that failed).
func (g *Registry) DropFirst(runID uuid.UUID) {
	if sub := g.First(runID); sub != nil {
		sub.Close()
	}
}

// CancelLocal cancels the run with why if this process runs it.
func (g *Registry) CancelLocal(runID uuid.UUID, why thread.RunStatus) {
	if ar := g.Get(runID); ar != nil {
		ar.Cancel(why)
	}
}

// Find answers the engine's FindRun from memory for a run this process
// runs, of the caller's thread, while its start is durable and its end is
// not yet: the store would say the same (running), and a rejoin or a
// cancel then costs no read. Before the start commits and once the end
// has, it returns nil and the store answers.
func (g *Registry) Find(caller string, threadID, runID uuid.UUID) *thread.Run {
	ar := g.Get(runID)
	if ar == nil || ar.run.ThreadID != threadID || ar.thread.Caller != caller || !ar.log.Live() {
		return nil
	}
	r := *ar.run
	return &r
}
