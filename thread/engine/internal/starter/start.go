// Package starter starts runs: it resolves where a run's messages go
// (the fork, a continuation's waiting turn, a retried message id), checks
// the limits, builds the model's request and launches the run on the
// runner, answering once its start is durable. A Starter holds its
// dependencies as fields.
package starter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/threadline/threadline/thread/engine/internal/runlog"
	"github.com/threadline/threadline/thread/engine/internal/trees"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine/internal/runner"
)

// Start resolves the fork, starts the model in the background and
// returns once the run's start (the user message, the run, its first
// snapshot) is durable: written alone when the start linger ends, or with
// the whole run if the model ended first. The caller streams it with
// the follower from sequence 0 (engine.FollowRun).
//
// Errors: invalid_request for a bad request or unknown model; not_found for a
// foreign thread or unknown attachment; invalid_fork for every fork rule;
// run_in_progress naming the active run; conflict for a message id reused
// with other content; unavailable when the run could not be saved. A retry
// with the same message id and content returns the run that message
// started, with existing true.
func (s *Starter) Start(ctx context.Context, caller string, threadID uuid.UUID, req thread.RunRequest) (run *thread.Run, existing bool, err error) {
	if err := req.Validate(); err != nil {
		return nil, false, err
	}
	req.Clean()
	if err := s.runner.CheckTools(req.Config); err != nil {
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
func (s *Starter) startOnce(ctx context.Context, caller string, threadID uuid.UUID, req thread.RunRequest) (run *thread.Run, existing bool, err error) {
	if err := s.limitCallerRuns(caller); err != nil {
		return nil, false, err
	}
	model, modelName, err := s.models.Resolve(req.Config.Model)
	if err != nil {
		return nil, false, err
	}
	if ar := s.active.OnThread(caller, threadID); ar != nil {
		return s.startOnLocalRun(ctx, caller, threadID, req, ar)
	}
	if th, tree := s.trees.Cached(caller, threadID); tree != nil {
		// The cached tree saves reading the thread; the start's guard
		// checks that the thread still ends where the tree does. Any
		// refusal but a busy thread may come from a stale tree (another
		// process appended, or deleted the thread), so it is retried
		// from the database.
		run, existing, err := s.startRun(ctx, caller, th, tree, req, model, modelName, false)
		if err == nil || err == errStartAgain || errcode.Of(err) == errcode.RunInProgress {
			return run, existing, err
		}
		s.trees.Forget(threadID)
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
		if p := req.Child; p != nil {
			th.Parent, th.Depth, th.Title = &p.Parent, p.Depth, p.Title
		}
		run, existing, cerr := s.startRun(ctx, caller, th, &checkpoint.Tree{}, req, model, modelName, true)
		if cerr == nil {
			s.trees.Own(th)
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
	tree, err := s.trees.Tree(ctx, th)
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
func (s *Starter) startOnLocalRun(ctx context.Context, caller string, threadID uuid.UUID, req thread.RunRequest, ar *runner.Active) (*thread.Run, bool, error) {
	if ok, err := ar.WaitStart(ctx); err != nil {
		return nil, false, err
	} else if !ok {
		return nil, false, errStartAgain
	}
	if m := req.Message; m != nil && m.ID != uuid.Nil && m.ID == ar.Run().UserMessageID && ar.User() != nil {
		if s.sameParent(caller, threadID, ar.User().ParentID, req.ParentID) && checkpoint.PartsEqual(ar.User().Content, m.Content) {
			return ar.Run(), true, nil
		}
		return nil, false, errcode.New(errcode.Conflict, "message id %s already exists with other content or parent", m.ID)
	}
	return nil, false, &errcode.Error{Code: errcode.RunInProgress,
		Message: fmt.Sprintf("run %s is in progress on this thread; cancel it or rejoin it", ar.Run().ID),
		RunID:   ar.Run().ID, MessageID: ar.Run().MessageID}
}

// startRun is StartRun on a thread whose tree is known; create says the
// thread does not exist yet and the run's write creates it.
func (s *Starter) startRun(ctx context.Context, caller string, th *thread.Thread, tree *checkpoint.Tree, req thread.RunRequest,
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
	if s.active.Closed() {
		return nil, false, runlog.ErrShuttingDown
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
	var ans *runner.Answers
	if req.Continuation() {
		ans = &runner.Answers{Results: req.ToolResults, Approvals: req.Approvals}
	}
	s.active.KeepFirst(r.ID, s.hub.Subscribe(r.ID))
	if user != nil {
		if tree, err = tree.Append(*user); err != nil {
			s.active.DropFirst(created.ID)
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
	if create {
		in.Create = th
	}
	ar, started := s.runner.Launch(th, user, created, ans, tree, model, mreq, in)
	err = <-started
	if ar != nil {
		ar.Settle(err == nil)
	}
	if err != nil {
		return s.startFailed(ctx, caller, threadID, created, user, req, err)
	}
	return created, false, nil
}

// startFailed answers a start whose write failed with err: another
// start launched first on the thread (wait for it, then go again), a
// concurrent retry of the same message id that won, or the error itself.
func (s *Starter) startFailed(ctx context.Context, caller string, threadID uuid.UUID, created *thread.Run, user *checkpoint.Node, req thread.RunRequest, err error) (*thread.Run, bool, error) {
	if err == runlog.ErrShuttingDown {
		s.active.DropFirst(created.ID)
		return nil, false, err
	}
	if other, ok := err.(*runner.ThreadBusy); ok {
		// Another start on the thread was launched first: its outcome
		// decides, so wait for it. Another caller's run that started
		// makes the thread theirs; else go again.
		s.active.DropFirst(created.ID)
		ok, err := other.Active.WaitStart(ctx)
		if err != nil {
			return nil, false, err
		}
		if ok && other.Active.Caller() != caller {
			return nil, false, errcode.New(errcode.NotFound, "thread %s not found", threadID)
		}
		return nil, false, errStartAgain
	}
	if user != nil && req.Message.ID != uuid.Nil && (errcode.Of(err) == errcode.Conflict || errcode.Of(err) == errcode.RunInProgress) {
		// A concurrent retry with the same message id won the race.
		if th2, err2 := s.store.ThreadGet(ctx, caller, threadID); err2 == nil {
			if t2, err2 := s.trees.Tree(ctx, th2); err2 == nil {
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
func (s *Starter) sameParent(caller string, threadID, stored, named uuid.UUID) bool {
	if stored == named {
		return true
	}
	_, tree := s.trees.Cached(caller, threadID)
	return tree != nil && tree.WireID(stored) == named
}

// userNode is the run's new user message (nil for none), with its
// attachments read; not_found for an unknown attachment.
func (s *Starter) userNode(ctx context.Context, caller string, threadID uuid.UUID, m *thread.UserMessage) (*checkpoint.Node, error) {
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
func (s *Starter) resolveFork(ctx context.Context, th *thread.Thread, tree *checkpoint.Tree, req *thread.RunRequest, model *thread.Model, modelName *string) (checkpoint.Fork, uuid.UUID, error) {
	if !req.Continuation() {
		fork, err := tree.ResolveFork(checkpoint.ForkRequest{HasMessage: req.Message != nil, ParentID: req.ParentID, SourceID: req.SourceID})
		return fork, uuid.New(), err
	}
	tip, err := s.runner.WaitingTip(tree, *req)
	if err != nil {
		return checkpoint.Fork{}, uuid.Nil, err
	}
	inherited, err := s.runner.InheritConfig(ctx, th.ID, tip, req.Config)
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

// retried answers a retry of a message id that already exists: the same
// content returns the run it started; anything else is a conflict.
func (s *Starter) retried(ctx context.Context, th *thread.Thread, prev *checkpoint.Node, req thread.RunRequest) (*thread.Run, bool, error) {
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

func (s *Starter) attachments(ctx context.Context, caller string, ids []uuid.UUID) ([]checkpoint.Attachment, error) {
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

func (f failingModel) Stream(context.Context, thread.ModelRequest, func(thread.Delta) error) (thread.ModelResult, error) {
	return thread.ModelResult{}, &errcode.Error{Code: errcode.ModelError, Message: errcode.Message(f.err)}
}

// errUnsaved is StartRun's error when the run could not be written.
var errUnsaved = &errcode.Error{Code: errcode.Unavailable, Message: "the run could not be saved; retry the request with the same message id"}

// errStartAgain says a start met another start on its thread whose
// outcome was not known yet: StartRun tries again once it is.
var errStartAgain = &errcode.Error{Code: errcode.Unavailable, Message: "another run was being started on this thread; retry"}

// Config tunes a Starter; the engine's Config sets it, defaults applied.
type Config struct {
	Owner  string
	Lease  time.Duration
	Now    func() time.Time
	Limits Limits
}

// Starter starts runs on a Runner.
type Starter struct {
	store  thread.Store
	hub    thread.Hub
	models thread.Models
	atts   thread.Attachments
	trees  *trees.Cache
	active *runner.Registry
	runner *runner.Runner
	cfg    Config
}

// New returns a Starter of runs on rn, registered in active.
func New(store thread.Store, hub thread.Hub, models thread.Models, atts thread.Attachments, tc *trees.Cache,
	active *runner.Registry, rn *runner.Runner, cfg Config) *Starter {
	return &Starter{store: store, hub: hub, models: models, atts: atts, trees: tc, active: active, runner: rn, cfg: cfg}
}

func (s *Starter) now() time.Time { return s.cfg.Now().UTC().Truncate(time.Microsecond) }
