// Package threadtest is an in-memory thread.Store for testing the run
// engine without Postgres: it keeps the store's rules that the engine
// relies on (one running run per thread, a thread that grew refuses a
// start, claims fence an owner's writes, a refused write of several
// writes nothing) and lets a test make any write fail.
package threadtest

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

var _ thread.Store = (*Store)(nil)

// Store is the fake. Its zero value is not ready: use New.
type Store struct {
	// Fail, when set, is asked before every write with the method's name
	// (RunCreate, RunCreateAll, RunComplete, RunEventsAppend, RunFinish,
	// RunFinishAll, RunLeaseRenew, RunClaimExpired) and before a run's
	// reads (RunGet, RunEventsAfter); an error it returns is the method's,
	// and nothing is written or read.
	Fail func(op string) error

	mu      sync.Mutex
	threads map[uuid.UUID]*thread.Thread
	nodes   map[uuid.UUID][]checkpoint.Node // by thread, in Seq order
	runs    map[uuid.UUID]*run
}

type run struct {
	r      thread.Run
	log    []thread.Record
	cancel bool
}

// New returns an empty store.
func New() *Store {
	return &Store{threads: map[uuid.UUID]*thread.Thread{}, nodes: map[uuid.UUID][]checkpoint.Node{}, runs: map[uuid.UUID]*run{}}
}

func (s *Store) fail(op string) error {
	if s.Fail == nil {
		return nil
	}
	return s.Fail(op)
}

func notFound(what string, id uuid.UUID) error {
	return errcode.New(errcode.NotFound, "%s %s not found", what, id)
}

func (s *Store) thread(caller string, id uuid.UUID) (*thread.Thread, error) {
	t := s.threads[id]
	if t == nil || t.Caller != caller {
		return nil, notFound("thread", id)
	}
	return t, nil
}

// ThreadCreate implements thread.Store.
func (s *Store) ThreadCreate(_ context.Context, t *thread.Thread) (*thread.Thread, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.threads[t.ID]; old != nil {
		if old.Caller != t.Caller {
			return nil, false, errcode.New(errcode.Conflict, "thread id %s is taken", t.ID)
		}
		c := *old
		return &c, false, nil
	}
	if t.Parent != nil && s.threads[t.Parent.ThreadID] == nil {
		return nil, false, errcode.New(errcode.NotFound, "the thread or run no longer exists") // the foreign key
	}
	c := *t
	s.threads[t.ID] = &c
	out := c
	return &out, true, nil
}

// ThreadOwner implements thread.Store.
func (s *Store) ThreadOwner(_ context.Context, id uuid.UUID) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.threads[id]
	if t == nil {
		return "", notFound("thread", id)
	}
	return t.Caller, nil
}

// ThreadGet implements thread.Store.
func (s *Store) ThreadGet(_ context.Context, caller string, id uuid.UUID) (*thread.Thread, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.thread(caller, id)
	if err != nil {
		return nil, err
	}
	c := *t
	return &c, nil
}

// ThreadList implements thread.Store: the caller's threads, newest first.
func (s *Store) ThreadList(_ context.Context, caller string, limit int, after *thread.ThreadCursor) ([]*thread.Thread, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*thread.Thread
	for _, t := range s.threads {
		if t.Caller == caller && t.Parent == nil && (after == nil || listOrder(t, &thread.Thread{UpdatedAt: after.UpdatedAt, ID: after.ID}) > 0) {
			c := *t
			out = append(out, &c)
		}
	}
	slices.SortFunc(out, listOrder)
	return out[:min(limit, len(out))], nil
}

// listOrder is ThreadList's order, the store's keyset: updated_at, then
// id (as Postgres orders uuids, bytewise), both descending.
func listOrder(a, b *thread.Thread) int {
	if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
		return c
	}
	return bytes.Compare(b.ID[:], a.ID[:])
}

// ThreadUpdate implements thread.Store.
func (s *Store) ThreadUpdate(_ context.Context, caller string, id uuid.UUID, u thread.ThreadUpdate) (*thread.Thread, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.thread(caller, id)
	if err != nil {
		return nil, err
	}
	if u.Title != nil {
		title := *u.Title
		t.Title = &title
	}
	if u.Metadata != nil {
		t.Metadata = u.Metadata
	}
	t.UpdatedAt = time.Now().UTC().Truncate(time.Microsecond)
	c := *t
	return &c, nil
}

// ThreadDelete implements thread.Store.
func (s *Store) ThreadDelete(_ context.Context, caller string, id uuid.UUID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.thread(caller, id); err != nil {
		return err
	}
	s.deleteThread(id)
	return nil
}

// deleteThread deletes the thread, its runs and its children, as the
// database's ON DELETE CASCADE does.
func (s *Store) deleteThread(id uuid.UUID) {
	delete(s.threads, id)
	delete(s.nodes, id)
	for rid, r := range s.runs {
		if r.r.ThreadID == id {
			delete(s.runs, rid)
		}
	}
	for cid, t := range s.threads {
		if t.Parent != nil && t.Parent.ThreadID == id {
			s.deleteThread(cid)
		}
	}
}

// ThreadSetHead implements thread.Store.
func (s *Store) ThreadSetHead(_ context.Context, caller string, id, head uuid.UUID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.thread(caller, id)
	if err != nil {
		return err
	}
	t.HeadID = head
	return nil
}

// CheckpointsAfter implements thread.Store.
func (s *Store) CheckpointsAfter(_ context.Context, threadID uuid.UUID, after int64) ([]checkpoint.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.after(threadID, after), nil
}

func (s *Store) after(threadID uuid.UUID, after int64) []checkpoint.Node {
	var out []checkpoint.Node
	for _, n := range s.nodes[threadID] {
		if n.Seq > after {
			out = append(out, n)
		}
	}
	return out
}

// ThreadRead implements thread.Store.
func (s *Store) ThreadRead(_ context.Context, caller string, id uuid.UUID, after int64) (*thread.Thread, []checkpoint.Node, *thread.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.thread(caller, id)
	if err != nil {
		return nil, nil, nil, err
	}
	c := *t
	var active *thread.Run
	if r := s.active(id); r != nil {
		rc := r.r
		active = &rc
	}
	return &c, s.after(id, after), active, nil
}

func (s *Store) active(threadID uuid.UUID) *run {
	for _, r := range s.runs {
		if r.r.ThreadID == threadID && r.r.Status == thread.RunRunning {
			return r
		}
	}
	return nil
}

// open checks a run's start as threadline_run_open does, creating its
// thread first when in.Create says so (into created, to undo).
func (s *Store) open(in thread.RunCreate) (created bool, err error) {
	if in.Create != nil && s.threads[in.Thread] == nil {
		if p := in.Create.Parent; p != nil && s.threads[p.ThreadID] == nil {
			return false, errcode.New(errcode.NotFound, "the thread or run no longer exists") // the foreign key
		}
		c := *in.Create
		s.threads[in.Thread] = &c
		created = true
	}
	t, err := s.thread(in.Caller, in.Thread)
	if err != nil {
		return created, err
	}
	if a := s.active(in.Thread); a != nil {
		return created, &errcode.Error{Code: errcode.RunInProgress, Message: "a run is in progress", RunID: a.r.ID, MessageID: a.r.MessageID}
	}
	want := in.Run.TreeSeq
	if in.User != nil {
		want--
		for _, n := range s.nodes[in.Thread] {
			if n.ID == in.User.ID {
				return created, errcode.New(errcode.Conflict, "message %s already exists", n.ID)
			}
		}
	}
	if t.LastSeq != want {
		return created, errcode.New(errcode.Conflict, "thread %s changed", in.Thread)
	}
	parent := in.Run.ParentID
	if in.User != nil {
		parent = in.User.ParentID
	}
	if parent != uuid.Nil && !slices.ContainsFunc(s.nodes[in.Thread], func(n checkpoint.Node) bool { return n.ID == parent }) {
		return created, errcode.New(errcode.InvalidFork, "parent %s is not a message of thread %s", parent, in.Thread)
	}
	return created, nil
}

// start applies a checked start.
func (s *Store) start(in thread.RunCreate, first thread.Record) {
	t := s.threads[in.Thread]
	if in.User != nil {
		s.nodes[in.Thread] = append(s.nodes[in.Thread], *in.User)
	}
	t.LastSeq, t.HeadID, t.UpdatedAt = in.Run.TreeSeq, in.Run.MessageID, in.Run.CreatedAt
	r := in.Run
	r.Status, r.Claim = thread.RunRunning, 0
	s.runs[r.ID] = &run{r: r, log: []thread.Record{first}}
}

// RunCreate implements thread.Store.
func (s *Store) RunCreate(_ context.Context, in thread.RunCreate, first thread.Record) (*thread.Run, error) {
	if err := s.fail("RunCreate"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	created, err := s.open(in)
	if err != nil {
		if created {
			delete(s.threads, in.Thread)
		}
		return nil, err
	}
	s.start(in, first)
	r := in.Run
	r.LastSequence = first.Seq
	return &r, nil
}

// RunCreateAll implements thread.Store: all or nothing.
func (s *Store) RunCreateAll(ctx context.Context, ins []thread.RunCreate, firsts []thread.Record) error {
	if err := s.fail("RunCreateAll"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var made []uuid.UUID
	undo := func() {
		for _, id := range made {
			delete(s.threads, id)
		}
	}
	seen := map[uuid.UUID]*thread.Run{} // by thread, its start in ins
	for _, in := range ins {
		created, err := s.open(in)
		if created {
			made = append(made, in.Thread)
		}
		if a := seen[in.Thread]; err == nil && a != nil {
			// As the store: the earlier start is the running run.
			err = &errcode.Error{Code: errcode.RunInProgress, Message: "a run is in progress", RunID: a.ID, MessageID: a.MessageID}
		}
		if err != nil {
			undo()
			return err
		}
		seen[in.Thread] = &in.Run
	}
	for i, in := range ins {
		s.start(in, firsts[i])
	}
	return nil
}

// RunComplete implements thread.Store.
func (s *Store) RunComplete(_ context.Context, in thread.RunCreate, fin thread.RunFinish) error {
	if err := s.fail("RunComplete"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	created, err := s.open(in)
	if err != nil {
		if created {
			delete(s.threads, in.Thread)
		}
		return err
	}
	s.start(in, fin.Records[0])
	s.end(s.runs[in.Run.ID], fin)
	return nil
}

// end applies a checked end.
func (s *Store) end(r *run, fin thread.RunFinish) {
	t := s.threads[r.r.ThreadID]
	s.nodes[r.r.ThreadID] = append(s.nodes[r.r.ThreadID], fin.Assistant)
	t.LastSeq, t.HeadID = fin.Assistant.Seq, fin.Assistant.ID
	if t.Title == nil && fin.Title != "" {
		title := fin.Title
		t.Title = &title
	}
	now := time.Now().UTC()
	r.r.Status, r.r.Model, r.r.Usage, r.r.Error, r.r.FinishedAt = fin.Status, fin.Model, fin.Usage, fin.Error, &now
	r.r.Owner, r.r.LeaseUntil = "", time.Time{}
	r.log = append([]thread.Record(nil), fin.Records...)
}

func (s *Store) lookup(threadID, runID uuid.UUID) (*thread.Run, error) {
	r := s.runs[runID]
	if r == nil || r.r.ThreadID != threadID {
		return nil, notFound("run", runID)
	}
	c := r.r
	c.LastSequence = int64(len(r.log))
	return &c, nil
}

// RunGet implements thread.Store.
func (s *Store) RunGet(_ context.Context, threadID, runID uuid.UUID) (*thread.Run, error) {
	if err := s.fail("RunGet"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookup(threadID, runID)
}

// RunByUserMessage implements thread.Store.
func (s *Store) RunByUserMessage(_ context.Context, threadID, messageID uuid.UUID) (*thread.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.runs {
		if r.r.ThreadID == threadID && r.r.UserMessageID == messageID {
			return s.lookup(threadID, r.r.ID)
		}
	}
	return nil, notFound("run of message", messageID)
}

// RunActive implements thread.Store.
func (s *Store) RunActive(_ context.Context, threadID uuid.UUID) (*thread.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.active(threadID); r != nil {
		return s.lookup(threadID, r.r.ID)
	}
	return nil, notFound("running run of thread", threadID)
}

// holds reports whether a run is running under claim.
func (s *Store) holds(id uuid.UUID, claim int64) bool {
	r := s.runs[id]
	return r != nil && r.r.Status == thread.RunRunning && r.r.Claim == claim
}

// RunEventsAppend implements thread.Store: nothing is written if any
// segment's claim is lost.
func (s *Store) RunEventsAppend(_ context.Context, segs []thread.Segment) error {
	if err := s.fail("RunEventsAppend"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var lost []uuid.UUID
	for _, sg := range segs {
		if len(sg.Records) > 0 && !s.holds(sg.RunID, sg.Claim) {
			lost = append(lost, sg.RunID)
		}
	}
	if lost != nil {
		return &thread.ClaimLostError{Runs: lost}
	}
	for _, sg := range segs {
		r := s.runs[sg.RunID]
		for _, rec := range sg.Records {
			if rec.Seq != int64(len(r.log))+1 {
				return errcode.New(errcode.Internal, "run %s: record %d after %d", sg.RunID, rec.Seq, len(r.log))
			}
			r.log = append(r.log, rec)
		}
	}
	return nil
}

// RunEventsAfter implements thread.Store.
func (s *Store) RunEventsAfter(_ context.Context, runID uuid.UUID, after int64) ([]thread.Record, error) {
	if err := s.fail("RunEventsAfter"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.runs[runID]
	if r == nil {
		return nil, nil
	}
	var out []thread.Record
	for _, rec := range r.log {
		if rec.Seq > after {
			out = append(out, rec)
		}
	}
	return out, nil
}

// RunEventsPage implements thread.Store (the Fail op is RunEventsAfter).
func (s *Store) RunEventsPage(ctx context.Context, runID uuid.UUID, after int64, maxBytes int) ([]thread.Record, bool, error) {
	all, err := s.RunEventsAfter(ctx, runID, after)
	if err != nil {
		return nil, false, err
	}
	used := 0
	for i := range all {
		used += thread.RecordSize(&all[i])
		if i > 0 && used > maxBytes {
			return all[:i:i], true, nil
		}
	}
	return all, false, nil
}

// RunLogPurge implements thread.Store: the fake keeps nothing to purge.
func (s *Store) RunLogPurge(context.Context) (bool, error) { return false, nil }

// finish checks a run's end under its claim.
func (s *Store) finish(in thread.RunFinish) (*run, error) {
	if !s.holds(in.Run.ID, in.Run.Claim) {
		return nil, &thread.ClaimLostError{Runs: []uuid.UUID{in.Run.ID}}
	}
	r := s.runs[in.Run.ID]
	if t := s.threads[r.r.ThreadID]; t == nil || t.LastSeq+1 != in.Assistant.Seq {
		return nil, errcode.New(errcode.Conflict, "thread %s changed during run %s", r.r.ThreadID, r.r.ID)
	}
	return r, nil
}

// RunFinish implements thread.Store.
func (s *Store) RunFinish(_ context.Context, in thread.RunFinish) error {
	if err := s.fail("RunFinish"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.finish(in)
	if err != nil {
		return err
	}
	s.end(r, in)
	return nil
}

// RunFinishAll implements thread.Store: all or nothing.
func (s *Store) RunFinishAll(_ context.Context, ins []thread.RunFinish) error {
	if err := s.fail("RunFinishAll"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := make([]*run, len(ins))
	for i, in := range ins {
		r, err := s.finish(in)
		if err != nil {
			return err
		}
		rs[i] = r
	}
	for i, in := range ins {
		s.end(rs[i], in)
	}
	return nil
}

// RunLeaseRenew implements thread.Store.
func (s *Store) RunLeaseRenew(_ context.Context, claims []thread.RunClaim, until time.Time) (cancels, lost []uuid.UUID, err error) {
	if err := s.fail("RunLeaseRenew"); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range claims {
		if !s.holds(c.RunID, c.Claim) {
			lost = append(lost, c.RunID)
			continue
		}
		r := s.runs[c.RunID]
		r.r.LeaseUntil = until
		if r.cancel {
			cancels = append(cancels, c.RunID)
		}
	}
	return cancels, lost, nil
}

// RunRequestCancel implements thread.Store.
func (s *Store) RunRequestCancel(_ context.Context, runID uuid.UUID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.runs[runID]
	if r == nil || r.r.Status != thread.RunRunning {
		return errcode.New(errcode.Conflict, "run %s is not running", runID)
	}
	r.cancel = true
	return nil
}

// RunClaimExpired implements thread.Store: each claim takes a new epoch.
func (s *Store) RunClaimExpired(_ context.Context, owner string, now, until time.Time, limit int) ([]*thread.Run, error) {
	if err := s.fail("RunClaimExpired"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*thread.Run
	for _, r := range s.runs {
		if len(out) == limit {
			break
		}
		if r.r.Status == thread.RunRunning && r.r.LeaseUntil.Before(now) {
			r.r.Owner, r.r.LeaseUntil, r.r.Claim = owner, until, r.r.Claim+1
			c := r.r
			out = append(out, &c)
		}
	}
	return out, nil
}

// Lease returns a run's lease and status, for tests.
func (s *Store) Lease(runID uuid.UUID) (time.Time, thread.RunStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.runs[runID]; r != nil {
		return r.r.LeaseUntil, r.r.Status
	}
	return time.Time{}, ""
}
