package runner

import (
	"context"
	"encoding/json"
	"time"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine/internal/runlog"
)

func (s *Runner) leaseLoop(ctx context.Context) {
	tick := time.NewTicker(s.cfg.Lease / 3)
	defer tick.Stop()
	purge := time.NewTicker(time.Second)
	defer purge.Stop()
	s.Recover(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-purge.C:
			s.commits.Purge(ctx)
			continue
		case <-tick.C:
		}
		s.RenewLeases(ctx)
		s.Recover(ctx)
	}
}

// RenewLeases extends the lease of every run this process runs under its
// claim, but not of a run it released (its end could not be written):
// claims are per run, so such a run lapses and is recovered while the
// others go on. A run whose claim was lost (recovered elsewhere after a
// stall here, or its thread deleted) is stopped at once and publishes
// nothing more; one whose cancel was requested elsewhere is cancelled.
func (s *Runner) RenewLeases(ctx context.Context) {
	runs := s.active.All()
	claims := make([]thread.RunClaim, 0, len(runs))
	for _, ar := range runs {
		if c, ok := ar.claim(); ok {
			claims = append(claims, c)
		}
	}
	if len(claims) == 0 {
		return
	}
	cancels, lost, err := s.store.RunLeaseRenew(ctx, claims, s.now().Add(s.cfg.Lease))
	if err != nil && ctx.Err() == nil {
		s.log.Error("renew run leases", "err", err)
	}
	for _, id := range cancels {
		s.active.CancelLocal(id, thread.RunCancelled)
	}
	for _, id := range lost {
		if ar := s.active.Get(id); ar != nil {
			ar.Lose()
		}
	}
}

// Recover ends every run whose lease expired: its reply is written as
// incomplete/other with the text its log holds, and its log ends with an
// error event (run_interrupted) and an interrupted snapshot. It returns
// how many runs it recovered.
func (s *Runner) Recover(ctx context.Context) int {
	n := 0
	for {
		now := s.now()
		runs, err := s.store.RunClaimExpired(ctx, s.cfg.Owner, now, now.Add(s.cfg.Lease), 16)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("claim expired runs", "err", err)
			}
			return n
		}
		if len(runs) == 0 {
			return n
		}
		failed := 0
		for _, r := range runs {
			if err := s.recoverRun(ctx, r); err != nil {
				// Its new lease lapses and a later pass tries again.
				s.log.Error("recover run", "run_id", r.ID, "err", err)
				failed++
				continue
			}
			s.commits.MarkDirty() // its log rows can go
			n++
		}
		if failed == len(runs) {
			return n
		}
	}
}

func (s *Runner) recoverRun(ctx context.Context, r *thread.Run) error {
	recs, err := s.store.RunEventsAfter(ctx, r.ID, 0)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		recs = []thread.Record{{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: r.TreeSeq}}
	}
	for i := range recs {
		// A log written before its tokens were cleaned (storable).
		recs[i].Text, recs[i].Code = thread.Storable(recs[i].Text), errcode.Code(thread.Storable(string(recs[i].Code)))
	}
	// Recovery acts for the thread's owner, through the same checked
	// reads as a request of that owner.
	owner, err := s.store.ThreadOwner(ctx, r.ThreadID)
	if err != nil {
		return err
	}
	th, err := s.store.ThreadGet(ctx, owner, r.ThreadID)
	if err != nil {
		return err
	}
	tree, err := s.trees.Tree(ctx, th)
	if err != nil {
		return err
	}
	// Calls that have no result were cut off: they are answered, never
	// run again.
	fold := runlog.Seeded(r, tree)
	for i := range recs {
		fold.Add(&recs[i])
	}
	var tail []thread.Record
	for _, id := range fold.Unanswered() {
		tail = append(tail, thread.Record{Seq: recs[len(recs)-1].Seq + int64(len(tail)) + 1, Kind: thread.KindToolResult, CallID: id,
			Data: json.RawMessage(`"interrupted"`), IsError: true})
	}
	tail = append(tail, thread.Record{Seq: recs[len(recs)-1].Seq + int64(len(tail)) + 1, Kind: thread.KindError, Code: errcode.RunInterrupted,
		Text: "the run was interrupted: the process running it stopped before it ended; the reply keeps what it had streamed"})
	for i := range tail {
		fold.Add(&tail[i])
	}
	recs = append(recs, tail...)
	content := fold.Content()
	st := &checkpoint.Status{Type: "incomplete", Reason: "other"}
	err = s.finish(finishing{run: r, tree: tree.Upto(r.TreeSeq), status: thread.RunInterrupted, st: st, content: content, all: recs,
		tail: tail, model: r.Model})
	if err != nil {
		return err
	}
	s.log.Warn("recovered interrupted run", "run_id", r.ID, "thread_id", r.ThreadID, "bytes_kept", len(replyText(content)))
	return nil
}
