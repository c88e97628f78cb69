package runner

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine/internal/batch"
	"github.com/threadline/threadline/thread/engine/internal/commit"
	"github.com/threadline/threadline/thread/engine/internal/runlog"
)

func (s *Runner) publish(w *logWriter, batch []thread.Record, since time.Time) {
	r := w.run
	evs := make([]thread.Event, len(batch))
	tokens := 0
	for i := range batch {
		rec := &batch[i]
		if rec.Kind == thread.KindSnapshot {
			evs[i] = thread.Event{Type: thread.KindSnapshot, RunID: r.ID, Sequence: rec.Seq, Snapshot: w.snapshot(rec.Seq)}
			continue
		}
		evs[i] = w.recordEvent(r, rec)
		if rec.Kind == thread.KindToken {
			tokens++
		}
	}
	s.hub.Publish(r.ID, evs...)
	if s.cfg.OnPublish != nil && tokens > 0 {
		s.cfg.OnPublish(time.Since(since), tokens)
	}
}

// execute runs the model, logs its tokens and writes the final state.
// Nothing is written for up to StartLinger: a run that ends within it is
// written whole, with one commit (Store.RunComplete); otherwise its start is
// committed when the linger ends (Store.RunCreate), its first snapshot is
// published and the tokens follow through the group commit. started gets
// the outcome of whichever commit writes the start.
func (s *Runner) execute(ar *Active, tree *checkpoint.Tree, model thread.Model, req thread.ModelRequest, in thread.RunCreate, started chan<- error) {
	r := ar.run
	w := ar.log
	ctx, span := s.startRunSpan(ar.ctx, r)
	defer span.End()
	t := &turnRun{s: s, ar: ar, w: w, tree: tree, seq: 1, fold: runlog.Seeded(r, tree), ctx: ctx}
	firstRec := runlog.FirstRecord(r)
	firstEv := thread.Event{Type: thread.KindSnapshot, RunID: r.ID, Sequence: 1, Snapshot: &thread.Snapshot{
		ThreadID: r.ThreadID, RunStatus: thread.RunRunning, Tree: tree, Running: runlog.RunningNode(r, tree, t.fold.Content()), Head: r.MessageID}}
	commitStart := func() {
		if !w.ClaimStart(commit.StartCommitting) {
			return // the run ended first and is written whole
		}
		err := s.starts.Write(startReq{in, firstRec})
		if err != nil {
			// Refused or not saved: nothing of the run is to be. Free the
			// thread before the caller hears of it. A write that failed
			// for want of the database may have committed all the same:
			// then the run is released once the database answers.
			var mw *batch.MaybeWritten
			ar.unsure.Store(retryable(err) || errors.As(err, &mw))
			ar.Cancel(thread.RunFailed)
			s.leaveThread(r)
			w.Started(false)
			started <- err
			return
		}
		s.trees.Put(r.ThreadID, tree)
		s.hub.Publish(r.ID, firstEv)
		w.Started(true)
		started <- nil
	}
	t.commitStart = commitStart
	var linger *time.Timer
	if s.cfg.StartLinger > 0 {
		linger = time.AfterFunc(s.cfg.StartLinger, commitStart)
	} else {
		commitStart()
	}
	res, err := s.drive(t, model, req, r.Config)
	merged := w.ClaimStart(commit.StartMerged)
	if merged {
		linger.Stop()
	} else {
		<-w.StartDone()
	}
	tail := w.Stop()
	all := w.All()
	if w.Failed() {
		failRunSpan(span, "start_not_written", "the run's start could not be written")
		s.hub.End(r.ID) // nothing was published
		return
	}
	if !ar.end() {
		failRunSpan(span, "claim_lost", "the run lost its claim")
		// Recovery elsewhere took the run over: it ends it from the log,
		// which holds everything published here. Followers here read it
		// there once their subscriptions end.
		s.log.Warn("run lost its claim; stopped", "run_id", r.ID, "thread_id", r.ThreadID)
		s.hub.End(r.ID)
		return
	}

	status, st, runErr := endStatus(ar, res, err)
	endRunSpan(span, status, res, runErr)
	if runErr != nil {
		st = &checkpoint.Status{Type: "incomplete", Reason: "error", Error: runErr.Message}
		errRec := thread.Record{Seq: t.seq + 1, Kind: thread.KindError, Text: runErr.Message, Code: runErr.Code}
		tail, all = append(tail, errRec), append(all, errRec)
	}
	var usage *thread.Usage
	if res.PromptTokens > 0 || res.CompletionTokens > 0 {
		usage = &thread.Usage{PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens}
		if t.calls > 1 {
			// A run of one model call keeps no steps: its totals are the
			// step's (what a chat turn's row holds stays as small).
			usage.Steps = t.steps
		}
	}
	modelName := r.Model
	if res.Model != "" && res.Model != r.Model {
		modelName = r.Model + " (" + thread.Storable(res.Model) + ")"
	}
	// The first turn names its thread whatever its outcome (a stopped or
	// failed first reply still leaves the question to name it by); the
	// title model is asked only about a reply that succeeded.
	first := r.UserMessageID != uuid.Nil && r.TreeSeq == 1
	byModel := first && status == thread.RunSucceeded && s.cfg.TitleModel != ""
	content := t.fold.Content()
	fin := finishing{run: r, ar: ar, log: w, tree: tree, status: status, st: st, content: content, all: all, tail: tail,
		model: modelName, usage: usage, err: runErr}
	if first && !byModel {
		// Titled in the final transaction, so a client that reads the
		// thread after the stream ends sees it.
		fin.title = thread.TitleFrom(tree.Nodes()[0].Text())
	}
	if merged {
		fin.create, fin.first, fin.started = &in, &firstEv, started
	}
	if s.finish(fin) != nil {
		return
	}
	if byModel {
		// A title model takes its time: the stream does not wait for it.
		s.autoTitle(ar.thread.Caller, r.ThreadID, tree, replyText(content))
	}
}

// endStatus is how a run ends: its status, its reply's status and its
// error, from the model's result and error.
func endStatus(ar *Active, res thread.ModelResult, err error) (thread.RunStatus, *checkpoint.Status, *thread.RunError) {
	me, coded := errcode.As(err)
	switch {
	case ar.ctx.Err() != nil && ar.reason() != "":
		return thread.RunCancelled, &checkpoint.Status{Type: "incomplete", Reason: "cancelled"}, nil
	case coded && me.Code.IsModel():
		return thread.RunFailed, nil, &thread.RunError{Code: me.Code, Message: thread.Storable(me.Message)}
	case err != nil:
		return thread.RunFailed, nil, &thread.RunError{Code: errcode.ModelError, Message: thread.Storable(err.Error())}
	case res.StopReason == "length", res.StopReason == "content-filter":
		return thread.RunSucceeded, &checkpoint.Status{Type: "incomplete", Reason: res.StopReason}, nil
	case res.StopReason == "tool-calls":
		st := waitingStatus
		return thread.RunRequiresAction, &st, nil
	}
	return thread.RunSucceeded, &checkpoint.Status{Type: "complete", Reason: "stop"}, nil
}

// finishing is what finish writes and publishes.
type finishing struct {
	run     *thread.Run
	ar      *Active    // nil when recovering another process's run
	log     *logWriter // nil when recovering another process's run
	tree    *checkpoint.Tree
	status  thread.RunStatus
	st      *checkpoint.Status
	content []checkpoint.Part // the reply
	all     []thread.Record   // the whole log from sequence 1
	tail    []thread.Record   // what was not published yet
	model   string
	usage   *thread.Usage
	err     *thread.RunError
	title   string // the thread's title if it has none
	// create is the run's unwritten start, written with the end; first is
	// then its first event, published before the tail, and started is
	// told the outcome.
	create  *thread.RunCreate
	first   *thread.Event
	started chan<- error
}

// finish writes the assistant checkpoint and the compacted log, then
// publishes what was not yet published and ends the run's subscriptions.
// It returns the write's error when the end could not be written: nothing
// more is published then (see writeEnd).
func (s *Runner) finish(f finishing) error {
	r, tree, status, all, tail := f.run, f.tree, f.status, f.all, f.tail
	asst := checkpoint.Node{
		ID: runlog.CheckpointOf(r, tree), ThreadID: r.ThreadID, ParentID: r.ParentID, Seq: r.TreeSeq + 1, Role: checkpoint.RoleAssistant,
		Content: f.content, Status: f.st, RunID: r.ID, CreatedAt: r.CreatedAt,
	}
	final := thread.Record{Seq: all[len(all)-1].Seq + 1, Kind: thread.KindSnapshot, Status: status, TreeSeq: asst.Seq}
	all = append(all, final)
	tail = append(tail, final)
	in := thread.RunFinish{Run: r, Status: status, Assistant: asst, Records: all, Model: f.model, Usage: f.usage, Error: f.err, Title: f.title}
	if err := s.writeEnd(f, in); err != nil {
		s.endUnwritten(f, err)
		return err
	}
	if f.ar != nil {
		f.ar.release() // ended: nothing to renew
	}
	if f.log != nil {
		f.log.End(all) // before publishing: see committer.commit
	}
	s.leaveThread(r)
	nt, err := tree.Append(asst)
	if err == nil {
		s.trees.Put(r.ThreadID, nt)
		tree = nt
	}
	events := make([]thread.Event, 0, len(tail)+1)
	if f.first != nil {
		events = append(events, *f.first)
	}
	for i := range tail {
		events = append(events, s.tailEvent(f, &tail[i], tree, all))
	}
	s.hub.Publish(r.ID, events...)
	s.hub.End(r.ID)
	if f.started != nil {
		// Told last: the StartRun caller's FollowRun then finds the whole
		// run in its subscription instead of waiting to be woken again.
		f.started <- nil
	}
	if s.cfg.OnRunEnd != nil {
		s.cfg.OnRunEnd(status)
	}
	s.log.Info("run ended", "run_id", r.ID, "thread_id", r.ThreadID, "status", status, "events", final.Seq)
	return nil
}

// tailEvent is the event of a record finish publishes: the final snapshot
// shows the thread with the reply, an interim one the reply so far.
func (s *Runner) tailEvent(f finishing, rec *thread.Record, tree *checkpoint.Tree, all []thread.Record) thread.Event {
	r := f.run
	switch {
	case rec.Kind != thread.KindSnapshot:
		return f.log.recordEvent(r, rec)
	case rec.Status.Done():
		return thread.Event{Type: thread.KindSnapshot, RunID: r.ID, Sequence: rec.Seq,
			Snapshot: &thread.Snapshot{ThreadID: r.ThreadID, RunStatus: f.status, Tree: tree, Head: r.MessageID}}
	}
	if f.log != nil {
		if snap := f.log.snapshot(rec.Seq); snap != nil {
			return thread.Event{Type: thread.KindSnapshot, RunID: r.ID, Sequence: rec.Seq, Snapshot: snap}
		}
	}
	fold := runlog.Seeded(r, tree)
	for i := range all[:rec.Seq-1] {
		fold.Add(&all[i])
	}
	return runlog.Event(r, *rec, tree, fold.Content())
}

// endUnwritten settles a run whose end could not be written: nothing more
// of it is published and its subscriptions end (followers read the rest
// from the store). A committed start that is still this process's is
// released: its lease is not renewed, so recovery, here or elsewhere, ends
// it from its durable log once the lease lapses. An unwritten start left
// nothing behind, and StartRun returns the error.
func (s *Runner) endUnwritten(f finishing, err error) {
	r := f.run
	var lost *thread.ClaimLostError
	switch {
	case f.create != nil:
	case f.ar == nil: // recovery: the caller reports it
	case errors.As(err, &lost):
		s.log.Warn("run lost its claim before its end was written; stopped", "run_id", r.ID, "thread_id", r.ThreadID)
	default:
		f.ar.release()
		s.log.Error("write run end; released for recovery", "run_id", r.ID, "thread_id", r.ThreadID, "err", err)
	}
	s.leaveThread(r)
	s.hub.End(r.ID)
	if f.started != nil {
		f.started <- err
	}
}

// writeEnd writes a run's end: with its start when that was never written
// (Store.RunComplete), else through the ends batcher (Store.RunFinish). An
// end write after a committed start that fails for a cause other than a
// refusal (a coded error, a lost claim) is retried with backoff for up to
// a lease: a database that comes back within it keeps the whole reply. A
// run written whole is not retried: nothing of it was published or
// stored, and StartRun answers unavailable at once. Recovery's writes are
// not retried here either: a failed one is tried again after the lease it
// took.
func (s *Runner) writeEnd(f finishing, in thread.RunFinish) error {
	deadline := time.Now().Add(s.cfg.Lease)
	wait := s.cfg.RetryMin
	for {
		var err error
		if f.create != nil {
			ctx, cancel := context.WithTimeout(context.Background(), max(s.cfg.Lease/3, time.Second))
			err = s.store.RunComplete(ctx, *f.create, in)
			cancel()
		} else {
			err = s.ends.Write(in)
		}
		if err == nil || f.ar == nil || f.create != nil || !retryable(err) || f.ar.isLost() || time.Now().Add(wait).After(deadline) {
			return err
		}
		s.log.Warn("write run end; retrying", "run_id", in.Run.ID, "in", wait.String(), "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-s.abandonCtx.Done():
			t.Stop()
			return err
		}
		wait = min(2*wait, s.cfg.RetryMax)
	}
}

// releaseUnsure ends a run whose start write failed in a way that may
// have committed it (a connection lost during the commit): the caller was
// told it failed and nothing here runs it, so, if it was written, it must
// not stay running until its lease lapses, holding its thread and freezing
// a client that retries with the same message id (which is given that
// run). Once the database answers, a written run has its lease expired and
// is recovered at once (interrupted, with its empty reply); one that was
// never written is left alone. It tries for up to a lease (then the lease
// has lapsed anyway) or until Shutdown's grace ends.
func (s *Runner) releaseUnsure(r *thread.Run) {
	deadline := time.Now().Add(s.cfg.Lease)
	wait := s.cfg.RetryMin
	for {
		ctx, cancel := context.WithTimeout(s.abandonCtx, max(s.cfg.Lease/3, time.Second))
		_, lost, err := s.store.RunLeaseRenew(ctx, []thread.RunClaim{{RunID: r.ID, Claim: r.Claim}}, time.Unix(0, 0).UTC())
		cancel()
		if err == nil {
			if len(lost) == 0 {
				s.log.Warn("a run whose start failed had been written; recovering it", "run_id", r.ID, "thread_id", r.ThreadID)
				s.Recover(s.abandonCtx)
			}
			return
		}
		if time.Now().Add(wait).After(deadline) {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-s.abandonCtx.Done():
			t.Stop()
			return
		}
		wait = min(2*wait, s.cfg.RetryMax)
	}
}

// retryable reports whether a failed write may succeed if tried again:
// not a refusal (a coded error other than unavailable, the store's word
// for a database outage), not a lost claim, not a stopped service.
func retryable(err error) bool {
	var lost *thread.ClaimLostError
	if errors.As(err, &lost) || errors.Is(err, batch.ErrBatcherStopped) {
		return false
	}
	e, coded := errcode.As(err)
	return !coded || e.Code == errcode.Unavailable
}
