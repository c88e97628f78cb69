package runner

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// Active is a run this process owns.
type Active struct {
	run *thread.Run
	// startWaiters counts the calls waiting in waitStart (tests wait on it).
	startWaiters atomic.Int32
	// answers are a continuation's, for its run loop.
	answers *Answers
	ctx     context.Context
	stop    context.CancelFunc
	mu      sync.Mutex
	why     thread.RunStatus // why it was cancelled
	done    chan struct{}
	thread  *thread.Thread
	user    *checkpoint.Node // the run's new user message, or nil
	log     *logWriter
	// ending says the model is done and the run's end is being written:
	// a cancel can no longer change it.
	ending bool
	// lost says the run's claim was taken elsewhere: it stops, and
	// nothing more of it is written or published.
	lost bool
	// released says its lease is not renewed any more: it ended, lost its
	// claim, or its end could not be written and recovery is to end it.
	released bool
	// started is closed once the run's start is settled, and startOK
	// then says whether it was committed. Until then the run may never
	// exist: a concurrent start on its thread waits before naming it.
	started chan struct{}
	startOK bool
	// unsure says the start's write failed in a way that may have
	// committed it (the connection died during the commit): the run may
	// exist with nobody running it (releaseUnsure).
	unsure atomic.Bool
}

// settle records the outcome of the run's start and wakes its waiters.
func (a *Active) Settle(ok bool) {
	a.mu.Lock()
	a.startOK = ok
	a.mu.Unlock()
	close(a.started)
}

// waitStart waits until the run's start is settled and reports whether
// it was committed; ctx's error if ctx ends first.
func (a *Active) WaitStart(ctx context.Context) (bool, error) {
	a.startWaiters.Add(1)
	defer a.startWaiters.Add(-1)
	select {
	case <-a.started:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.startOK, nil
}

// cancel stops the run's model with why as its final status. It reports
// false when the model was already done and the end is being written.
func (a *Active) Cancel(why thread.RunStatus) bool {
	a.mu.Lock()
	if a.ending {
		a.mu.Unlock()
		return false
	}
	if a.why == "" {
		a.why = why
	}
	a.mu.Unlock()
	a.stop()
	return true
}

func (a *Active) reason() thread.RunStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.why
}

// lose records that the run's claim was lost: its model stops, and its
// log writer writes and publishes nothing more.
func (a *Active) Lose() {
	a.mu.Lock()
	first := !a.lost
	a.lost, a.released = true, true
	a.mu.Unlock()
	if first {
		a.log.Lose()
		a.stop()
	}
}

func (a *Active) isLost() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lost
}

// end marks the model done: a cancel from now on waits for the end. It
// reports false if the claim was lost first.
func (a *Active) end() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ending = true
	return !a.lost
}

func (a *Active) release() {
	a.mu.Lock()
	a.released = true
	a.mu.Unlock()
}

// claim returns the run's claim while its lease is to be renewed: its
// start is committed and it was not released.
func (a *Active) claim() (thread.RunClaim, bool) {
	a.mu.Lock()
	released := a.released
	a.mu.Unlock()
	if released || !a.log.Committed() {
		return thread.RunClaim{}, false
	}
	return thread.RunClaim{RunID: a.run.ID, Claim: a.run.Claim}, true
}

// Run returns the run. Its fields are not changed after its start.
func (a *Active) Run() *thread.Run { return a.run }

// User returns the run's new user message, or nil.
func (a *Active) User() *checkpoint.Node { return a.user }

// Caller returns the caller whose thread the run is on.
func (a *Active) Caller() string { return a.thread.Caller }

// Live reports whether the run's start is durable and its end is not yet.
func (a *Active) Live() bool { return a.log.Live() }

// Done is closed once the run's goroutine is done with it.
func (a *Active) Done() <-chan struct{} { return a.done }

// StartWaiters is how many calls wait in WaitStart (tests wait on it).
func (a *Active) StartWaiters() int { return int(a.startWaiters.Load()) }
