package runner

import (
	"context"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// ThreadBusy is Launch's refusal of a run on a thread that has one here
// already (whose start may still fail): nothing of the run was started.
type ThreadBusy struct{ Active *Active }

func (b *ThreadBusy) Error() string { return "a run is being started on this thread" }

// Launch starts the run loop in the background and returns the run. The
// returned channel says, once, whether the run's start was committed
// (alone, or with the whole run): until then nothing of the run is
// written or published. A thread with a run here already is refused
// with a *ThreadBusy and a nil run, before anything starts: a thread's
// run is named to others only once its start is settled (settle).
func (s *Runner) Launch(th *thread.Thread, user *checkpoint.Node, r *thread.Run, ans *Answers, tree *checkpoint.Tree, model thread.Model, req thread.ModelRequest, in thread.RunCreate) (*Active, <-chan error) {
	ctx, stop := context.WithCancel(s.spanParent(th.ID))
	ar := &Active{run: r, answers: ans, ctx: ctx, stop: stop, done: make(chan struct{}), thread: th, user: user,
		started: make(chan struct{})}
	ar.log = s.newLogWriter(r, ar.Lose)
	started := make(chan error, 1)
	if err := s.active.add(ar); err != nil {
		stop()
		started <- err
		return nil, started
	}
	go func() {
		defer s.active.done.Done()
		defer close(ar.done)
		defer stop()
		s.execute(ar, tree, model, req, in, started)
		s.active.remove(r.ID)
		s.leaveThread(r)
		if ar.unsure.Load() {
			s.releaseUnsure(r)
		}
	}()
	return ar, started
}

// leaveThread marks the thread free of r: called once r's end is durable
// (or r failed), before its final event goes out, so a client that reads
// that event can start the next run at once.
func (s *Runner) leaveThread(r *thread.Run) {
	s.active.leave(r)
}
