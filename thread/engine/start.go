package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/errcode"
)

// StartRun resolves the fork, starts the model in the background and
// returns once the run's start (the user message, the run, its first
// snapshot) is durable: written alone when the start linger ends, or with
// the whole run if the model ended first. The caller streams it with
// FollowRun from sequence 0.
//
// Errors: invalid_request for a bad request or unknown model; not_found for a
// foreign thread or unknown attachment; invalid_fork for every fork rule;
// run_in_progress naming the active run; conflict for a message id reused
// with other content; unavailable when the run could not be saved. A retry
// with the same message id and content returns the run that message
// started, with existing true.
func (s *Service) StartRun(ctx context.Context, caller string, threadID uuid.UUID, req thread.RunRequest) (run *thread.Run, existing bool, err error) {
	if err := req.Validate(); err != nil {
		return nil, false, err
	}
	req.Clean()
	if err := s.checkTools(req.Config); err != nil {
		return nil, false, err
	}
	// Another start on the thread whose outcome was not known is waited
	// for, then this one goes again: a few times at most, each after a
	// start settled.
	for attempt := 0; ; attempt++ {
		run, existing, err = s.startOnce(ctx, caller, threadID, req)
		if err != errStartAgain || attempt == 3 {
			return run, existing, err
		}
	}
}

// startOnce is one attempt of StartRun; errStartAgain asks for another.
func (s *Service) startOnce(ctx context.Context, caller string, threadID uuid.UUID, req thread.RunRequest) (run *thread.Run, existing bool, err error) {
	if err := s.limitCallerRuns(caller); err != nil {
		return nil, false, err
	}
	model, modelName, err := s.models.Resolve(req.Config.Model)
	if err != nil {
		return nil, false, err
	}
	if ar := s.localRun(caller, threadID); ar != nil {
		return s.startOnLocalRun(ctx, caller, threadID, req, ar)
	}
	if th, tree := s.cached(caller, threadID); tree != nil {
		// The cached tree saves reading the thread; the start's guard
		// checks that the thread still ends where the tree does. Any
		// refusal but a busy thread may come from a stale tree (another
		// process appended, or deleted the thread), so it is retried
		// from the database.
		run, existing, err := s.startRun(ctx, caller, th, tree, req, model, modelName, false)
		if err == nil || err == errStartAgain || errcode.Of(err) == errcode.RunInProgress {
			return run, existing, err
		}
		s.forget(threadID)
	}
	var th *thread.Thread
	if req.Message != nil && req.ParentID == uuid.Nil && req.SourceID == uuid.Nil {
		// A message at the root needs nothing of the thread but its end:
		// it is taken as a new thread's first message without reading
		// the thread first. The guard refuses it if the thread exists
		// and has messages, and then it goes the long way below.
		err = errcode.New(errcode.NotFound, "not found")
	} else {
		th, err = s.store.ThreadGet(ctx, caller, threadID)
	}
	if errcode.Of(err) == errcode.NotFound {
		// A new thread: the run's first write creates it. If that is
		// refused (the id was taken meanwhile, by this caller or another),
		// the thread is read again below.
		now := s.now()
		th = &thread.Thread{ID: threadID, Caller: caller, Metadata: json.RawMessage(`{}`), CreatedAt: now, UpdatedAt: now}
		run, existing, cerr := s.startRun(ctx, caller, th, &checkpoint.Tree{}, req, model, modelName, true)
		if cerr == nil {
			s.trees.own(th.ID, th.Caller)
			return run, existing, nil
		}
		if code := errcode.Of(cerr); code == errcode.RunInProgress || code == errcode.Unavailable || code == errcode.Invalid {
			return nil, false, cerr
		}
		th, err = s.store.ThreadGet(ctx, caller, threadID)
	}
	if err != nil {
		return nil, false, err
	}
	tree, err := s.tree(ctx, th)
	if err != nil {
		return nil, false, err
	}
	return s.startRun(ctx, caller, th, tree, req, model, modelName, false)
}

// startOnLocalRun answers a start on a thread whose run this process
// runs. Its start may not be committed yet, and may never be (another
// start on the thread won): it is named only once it exists. The same
// message sent again gets that run (existing); otherwise conflict for the
// message id reused with other content or parent, run_in_progress naming
// the run, errStartAgain when its start failed, or ctx's error.
func (s *Service) startOnLocalRun(ctx context.Context, caller string, threadID uuid.UUID, req thread.RunRequest, ar *activeRun) (*thread.Run, bool, error) {
	if ok, err := ar.waitStart(ctx); err != nil {
		return nil, false, err
	} else if !ok {
		return nil, false, errStartAgain
	}
	if m := req.Message; m != nil && m.ID != uuid.Nil && m.ID == ar.run.UserMessageID && ar.user != nil {
		if s.sameParent(caller, threadID, ar.user.ParentID, req.ParentID) && checkpoint.PartsEqual(ar.user.Content, m.Content) {
			return ar.run, true, nil
		}
		return nil, false, errcode.New(errcode.Conflict, "message id %s already exists with other content or parent", m.ID)
	}
	return nil, false, &errcode.Error{Code: errcode.RunInProgress,
		Message: fmt.Sprintf("run %s is in progress on this thread; cancel it or rejoin it", ar.run.ID),
		RunID:   ar.run.ID, MessageID: ar.run.MessageID}
}

// startRun is StartRun on a thread whose tree is known; create says the
// thread does not exist yet and the run's write creates it.
func (s *Service) startRun(ctx context.Context, caller string, th *thread.Thread, tree *checkpoint.Tree, req thread.RunRequest,
	model thread.Model, modelName string, create bool) (*thread.Run, bool, error) {
	threadID := th.ID
	if !req.Continuation() {
		// A message under a continued turn goes under its newest checkpoint.
		if n := tree.Get(req.ParentID); n != nil && n.Role == checkpoint.RoleAssistant {
			req.ParentID = tree.TurnTip(req.ParentID).ID
		}
	}
	if m := req.Message; m != nil && m.ID != uuid.Nil {
		if prev := tree.Get(m.ID); prev != nil {
			return s.retried(ctx, th, prev, req)
		}
	}
	user, err := s.userNode(ctx, caller, threadID, req.Message)
	if err != nil {
		return nil, false, err
	}
	fork, turnID, err := s.resolveFork(ctx, th, tree, &req, &model, &modelName)
	if err != nil {
		return nil, false, err
	}
	if err := s.limitThreadSize(tree, 2); err != nil {
		return nil, false, err
	}
	if s.active.closed() {
		return nil, false, ErrShuttingDown
	}
	now := s.now()
	r := thread.Run{
		ID: uuid.New(), ThreadID: threadID, Status: thread.RunRunning, ParentID: fork.AssistantParent,
		MessageID: turnID, Model: modelName, Config: req.Config, Owner: s.cfg.Owner,
		LeaseUntil: now.Add(s.cfg.Lease), TreeSeq: th.LastSeq, CreatedAt: now,
	}
	if user != nil {
		user.ParentID = fork.UserParent
		user.CreatedAt = now
		user.RunID = r.ID
		user.Seq = th.LastSeq + 1
		r.UserMessageID, r.ParentID, r.TreeSeq = user.ID, user.ID, user.Seq
	}
	created := &r
	created.LastSequence = 1
	var ans *answers
	if req.Continuation() {
		ans = &answers{results: req.ToolResults, approvals: req.Approvals}
	}
	created.Local = &presub{sub: s.hub.Subscribe(r.ID)}
	if user != nil {
		if tree, err = tree.Append(*user); err != nil {
			firstOf(created).claim().Close()
			return nil, false, err
		}
	}
	mreq, err := s.modelRequest(ctx, caller, tree, created, req.Config)
	if err != nil {
		// Finish the run as failed rather than refuse it after the fact.
		mreq = thread.ModelRequest{}
		model = failingModel{err: err}
	}
	in := thread.RunCreate{Caller: caller, Thread: threadID, User: user, Run: r}
	in.Run.Local = nil // this process's subscription: a store that keeps the value (threadtest) must not hand it out
	if create {
		in.Create = th
	}
	ar, started := s.launch(th, user, created, ans, tree, model, mreq, in)
	err = <-started
	if ar != nil {
		ar.settle(err == nil)
	}
	if err != nil {
		return s.startFailed(ctx, caller, threadID, created, user, req, err)
	}
	return created, false, nil
}

// startFailed answers a start whose write failed with err: another
// start launched first on the thread (wait for it, then go again), a
// concurrent retry of the same message id that won, or the error itself.
func (s *Service) startFailed(ctx context.Context, caller string, threadID uuid.UUID, created *thread.Run, user *checkpoint.Node, req thread.RunRequest, err error) (*thread.Run, bool, error) {
	if err == ErrShuttingDown {
		firstOf(created).claim().Close()
		return nil, false, err
	}
	if other, ok := err.(*threadBusy); ok {
		// Another start on the thread was launched first: its outcome
		// decides, so wait for it. Another caller's run that started
		// makes the thread theirs; else go again.
		firstOf(created).claim().Close()
		ok, err := other.ar.waitStart(ctx)
		if err != nil {
			return nil, false, err
		}
		if ok && other.ar.thread.Caller != caller {
			return nil, false, errcode.New(errcode.NotFound, "thread %s not found", threadID)
		}
		return nil, false, errStartAgain
	}
	if user != nil && req.Message.ID != uuid.Nil && (errcode.Of(err) == errcode.Conflict || errcode.Of(err) == errcode.RunInProgress) {
		// A concurrent retry with the same message id won the race.
		if th2, err2 := s.store.ThreadGet(ctx, caller, threadID); err2 == nil {
			if t2, err2 := s.tree(ctx, th2); err2 == nil {
				if prev := t2.Get(req.Message.ID); prev != nil {
					return s.retried(ctx, th2, prev, req)
				}
			}
		}
	}
	var coded *errcode.Error
	if !errors.As(err, &coded) {
		// The cause stays in the chain for the log, out of the
		// caller's message.
		err = fmt.Errorf("%w: %w", errUnsaved, err)
	}
	return nil, false, err
}

// sameParent reports whether a stored user message's parent is the one a
// request names: the same id, or the turn's id of a continued turn's
// newest checkpoint.
func (s *Service) sameParent(caller string, threadID, stored, named uuid.UUID) bool {
	if stored == named {
		return true
	}
	_, tree := s.cached(caller, threadID)
	return tree != nil && tree.WireID(stored) == named
}

// userNode is the run's new user message (nil for none), with its
// attachments read; not_found for an unknown attachment.
func (s *Service) userNode(ctx context.Context, caller string, threadID uuid.UUID, m *thread.UserMessage) (*checkpoint.Node, error) {
	if m == nil {
		return nil, nil
	}
	atts, err := s.attachments(ctx, caller, m.AttachmentIDs)
	if err != nil {
		return nil, err
	}
	user := &checkpoint.Node{ID: m.ID, ThreadID: threadID, Role: checkpoint.RoleUser, Content: m.Content, Attachments: atts}
	if user.ID == uuid.Nil {
		user.ID = uuid.New()
	}
	return user, nil
}

// resolveFork resolves where the run's nodes go and the id of its reply's
// message: a new one, or for a continuation the waiting turn's, whose
// run_config (and so model) it takes when it names none. Errors as
// ResolveFork and waitingTip.
func (s *Service) resolveFork(ctx context.Context, th *thread.Thread, tree *checkpoint.Tree, req *thread.RunRequest, model *thread.Model, modelName *string) (checkpoint.Fork, uuid.UUID, error) {
	if !req.Continuation() {
		fork, err := tree.ResolveFork(checkpoint.ForkRequest{HasMessage: req.Message != nil, ParentID: req.ParentID, SourceID: req.SourceID})
		return fork, uuid.New(), err
	}
	tip, err := s.waitingTip(tree, *req)
	if err != nil {
		return checkpoint.Fork{}, uuid.Nil, err
	}
	inherited, err := s.inheritConfig(ctx, th.ID, tip, req.Config)
	if err != nil {
		return checkpoint.Fork{}, uuid.Nil, err
	}
	if !reflect.DeepEqual(inherited, req.Config) {
		req.Config = inherited
		if *model, *modelName, err = s.models.Resolve(inherited.Model); err != nil {
			return checkpoint.Fork{}, uuid.Nil, err
		}
	}
	return checkpoint.Fork{AssistantParent: tip.ID}, tree.WireID(tip.ID), nil
}

// leaveThread marks the thread free of r: called once r's end is durable
// (or r failed), before its final event goes out, so a client that reads
// that event can start the next run at once.
func (s *Service) leaveThread(r *thread.Run) {
	s.active.leave(r)
}

// localRun returns the caller's thread's run that this process runs, or nil.
func (s *Service) localRun(caller string, threadID uuid.UUID) *activeRun {
	return s.active.onThread(caller, threadID)
}

// retried answers a retry of a message id that already exists: the same
// content returns the run it started; anything else is a conflict.
func (s *Service) retried(ctx context.Context, th *thread.Thread, prev *checkpoint.Node, req thread.RunRequest) (*thread.Run, bool, error) {
	same := prev.Role == checkpoint.RoleUser && s.sameParent(th.Caller, th.ID, prev.ParentID, req.ParentID) &&
		checkpoint.PartsEqual(prev.Content, req.Message.Content)
	if !same {
		return nil, false, errcode.New(errcode.Conflict, "message id %s already exists with other content or parent", prev.ID)
	}
	r, err := s.store.RunByUserMessage(ctx, th.ID, prev.ID)
	if err != nil {
		return nil, false, err
	}
	return r, true, nil
}

func (s *Service) attachments(ctx context.Context, caller string, ids []uuid.UUID) ([]checkpoint.Attachment, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if s.atts == nil {
		return nil, errcode.New(errcode.Invalid, "attachments are not enabled")
	}
	out := make([]checkpoint.Attachment, 0, len(ids))
	for _, id := range ids {
		a, _, err := s.atts.AttachmentData(ctx, caller, id)
		if err != nil {
			return nil, err
		}
		out = append(out, *a)
	}
	return out, nil
}

type failingModel struct{ err error }

func (f failingModel) Stream(context.Context, thread.ModelRequest, func(string) error) (thread.ModelResult, error) {
	return thread.ModelResult{}, &errcode.Error{Code: errcode.ModelError, Message: errcode.Message(f.err)}
}

// threadBusy is launch's refusal of a run on a thread that has one here
// already (whose start may still fail): nothing of the run was started.
type threadBusy struct{ ar *activeRun }

func (b *threadBusy) Error() string { return "a run is being started on this thread" }

// launch starts the run loop in the background and returns the run. The
// returned channel says, once, whether the run's start was committed
// (alone, or with the whole run): until then nothing of the run is
// written or published. A thread with a run here already is refused
// with a *threadBusy and a nil run, before anything starts: a thread's
// run is named to others only once its start is settled (settle).
func (s *Service) launch(th *thread.Thread, user *checkpoint.Node, r *thread.Run, ans *answers, tree *checkpoint.Tree, model thread.Model, req thread.ModelRequest, in thread.RunCreate) (*activeRun, <-chan error) {
	ctx, stop := context.WithCancel(context.Background())
	ar := &activeRun{run: r, answers: ans, ctx: ctx, stop: stop, done: make(chan struct{}), thread: th, user: user,
		started: make(chan struct{})}
	ar.log = s.newLogWriter(r, ar.lose)
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

// presub is a run's first subscription, made before its first event, for
// the StartRun caller's FollowRun to claim once: it then needs no catch-up
// read of the log. The hub's End closes it if nobody claims it.
type presub struct {
	mu  sync.Mutex
	sub stream.Subscription[thread.Event]
}

// firstOf returns the presub StartRun left on r, or nil.
func firstOf(r *thread.Run) *presub {
	p, _ := r.Local.(*presub)
	return p
}

func (p *presub) claim() stream.Subscription[thread.Event] {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	sub := p.sub
	p.sub = nil
	return sub
}

// errUnsaved is StartRun's error when the run could not be written.
var errUnsaved = &errcode.Error{Code: errcode.Unavailable, Message: "the run could not be saved; retry the request with the same message id"}

// errStartAgain says a start met another start on its thread whose
// outcome was not known yet: StartRun tries again once it is.
var errStartAgain = &errcode.Error{Code: errcode.Unavailable, Message: "another run was being started on this thread; retry"}
