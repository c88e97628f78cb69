package engine

import (
	"context"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// FindRun returns the run, to follow or cancel, without counting its
// log: a running run's LastSequence may be lower than its log's end (see
// GetRun). not_found for unknown runs or foreign threads.
func (s *Service) FindRun(ctx context.Context, caller string, threadID, runID uuid.UUID) (*thread.Run, error) {
	if r := s.active.Find(caller, threadID, runID); r != nil {
		return r, nil
	}
	if _, err := s.store.ThreadGet(ctx, caller, threadID); err != nil {
		return nil, err
	}
	return s.store.RunGet(ctx, threadID, runID)
}

// GetRun returns the run with its last durable sequence; not_found for
// unknown runs or foreign threads.
func (s *Service) GetRun(ctx context.Context, caller string, threadID, runID uuid.UUID) (*thread.Run, error) {
	r, err := s.FindRun(ctx, caller, threadID, runID)
	if err != nil || r.Status.Done() {
		return r, err
	}
	// The store counts a running run's group commits only when it reads
	// its log.
	recs, _, err := s.followers.Logged(ctx, runID, r.LastSequence)
	if err != nil {
		return nil, err
	}
	if n := len(recs); n > 0 {
		r.LastSequence = recs[n-1].Seq
	}
	return r, nil
}

// CancelRun stops a run, here or in the process that owns it. Cancelling a
// run that already ended does nothing. not_found for unknown runs.
func (s *Service) CancelRun(ctx context.Context, caller string, threadID, runID uuid.UUID) error {
	r, err := s.FindRun(ctx, caller, threadID, runID)
	if err != nil {
		return err
	}
	if r.Status.Done() {
		return nil
	}
	if ar := s.active.Get(runID); ar != nil {
		if ar.Cancel(thread.RunCancelled) {
			return nil
		}
		// Its model is done and its end is being written (retried while
		// the database is away): answer once it is settled, so that the
		// caller's next read sees the run ended.
		select {
		case <-ar.Done():
			return nil
		case <-ctx.Done():
			return errcode.New(errcode.Unavailable, "run %s has ended and its end is being written; retry", runID)
		}
	}
	if err := s.store.RunRequestCancel(ctx, runID); err != nil && errcode.Of(err) != errcode.Conflict {
		return err
	}
	return nil
}
