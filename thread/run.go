package thread

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread/engine"
	"github.com/threadline/threadline/thread/errcode"
)

// UserMessage is the message a run appends.
type UserMessage struct {
	ID            uuid.UUID // uuid.Nil: the service picks one
	Content       []checkpoint.Part
	AttachmentIDs []uuid.UUID
}

// RunRequest is POST /threads/{id}/runs/stream, decoded.
type RunRequest struct {
	Message      *UserMessage
	ParentID     uuid.UUID
	SourceID     uuid.UUID
	Config       RunConfig
	OnDisconnect string // "continue" (default) or "cancel"
	// ToolResults and Approvals continue a turn that waits (its run ended
	// requires_action): no Message, ParentID the turn's message.
	ToolResults []ToolResult
	Approvals   []Approval
}

// ToolResult answers a client tool's call.
type ToolResult struct {
	CallID  string          `json:"tool_call_id"`
	Result  json.RawMessage `json:"result"`
	IsError bool            `json:"is_error,omitempty"`
}

// Approval approves or rejects a call of a tool marked approval.
type Approval struct {
	CallID   string `json:"tool_call_id"`
	Approved bool   `json:"approved"`
	Reason   string `json:"reason,omitempty"`
}

// continuation reports whether the request continues a waiting turn.
func (r *RunRequest) continuation() bool { return len(r.ToolResults) > 0 || len(r.Approvals) > 0 }

// Validate checks the request's own shape; invalid_request names the field.
func (r *RunRequest) Validate() error {
	switch r.OnDisconnect {
	case "", "continue", "cancel":
	default:
		return errcode.New(errcode.Invalid, "on_disconnect must be \"continue\" or \"cancel\", got %q", r.OnDisconnect)
	}
	if r.Config.Temperature != nil && (*r.Config.Temperature < 0 || *r.Config.Temperature > 2) {
		return errcode.New(errcode.Invalid, "run_config.temperature must be between 0 and 2")
	}
	if err := r.Config.validateAgent(); err != nil {
		return err
	}
	if err := r.validateAnswers(); err != nil {
		return err
	}
	if bytes.Contains(r.Config.Custom, []byte(`\u0000`)) {
		// jsonb holds no U+0000; a client's own data is refused, not changed.
		return errcode.New(errcode.Invalid, "run_config.custom must not contain \\u0000")
	}
	if m := r.Message; m != nil {
		if len(m.Content) == 0 && len(m.AttachmentIDs) == 0 {
			return errcode.New(errcode.Invalid, "message.content must not be empty")
		}
		for i, p := range m.Content {
			switch p.Type {
			case "text":
				if !utf8.ValidString(p.Text) {
					return errcode.New(errcode.Invalid, "message.content[%d].text is not valid UTF-8", i)
				}
			case "image":
				if p.Image == "" {
					return errcode.New(errcode.Invalid, "message.content[%d].image must not be empty", i)
				}
			default:
				return errcode.New(errcode.Invalid, "message.content[%d].type must be \"text\" or \"image\", got %q", i, p.Type)
			}
		}
	}
	return nil
}

// clean makes the request's texts storable: a U+0000 in the message or
// the system prompt becomes U+FFFD (see storable), before the message id's
// idempotency compares contents.
func (r *RunRequest) clean() {
	r.Config.System = storable(r.Config.System)
	if m := r.Message; m != nil {
		var parts []checkpoint.Part
		for i, p := range m.Content {
			if t := storable(p.Text); t != p.Text {
				if parts == nil {
					parts = append([]checkpoint.Part(nil), m.Content...)
				}
				parts[i].Text = t
			}
		}
		if parts != nil {
			mm := *m
			mm.Content = parts
			r.Message = &mm
		}
	}
}

// errUnsaved is StartRun's error when the run could not be written.
var errUnsaved = &errcode.Error{Code: errcode.Unavailable, Message: "the run could not be saved; retry the request with the same message id"}

// errStartAgain says a start met another start on its thread whose
// outcome was not known yet: StartRun tries again once it is.
var errStartAgain = &errcode.Error{Code: errcode.Unavailable, Message: "another run was being started on this thread; retry"}

// ErrShuttingDown is returned by StartRun while the service drains, and
// by Follow for a run of another process once the service has drained.
var ErrShuttingDown = &errcode.Error{Code: errcode.Unavailable, Message: "the service is shutting down; retry on another instance"}

// activeRun is a run this process owns.
type activeRun struct {
	run    *Run
	ctx    context.Context
	stop   context.CancelFunc
	mu     sync.Mutex
	why    RunStatus // why it was cancelled
	done   chan struct{}
	thread *Thread
	user   *checkpoint.Node // the run's new user message, or nil
	log    *logWriter
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
func (a *activeRun) settle(ok bool) {
	a.mu.Lock()
	a.startOK = ok
	a.mu.Unlock()
	close(a.started)
}

// waitStart waits until the run's start is settled and reports whether
// it was committed; ctx's error if ctx ends first.
func (a *activeRun) waitStart(ctx context.Context) (bool, error) {
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
func (a *activeRun) cancel(why RunStatus) bool {
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

func (a *activeRun) reason() RunStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.why
}

// lose records that the run's claim was lost: its model stops, and its
// log writer writes and publishes nothing more.
func (a *activeRun) lose() {
	a.mu.Lock()
	first := !a.lost
	a.lost, a.released = true, true
	a.mu.Unlock()
	if first {
		a.log.Lose()
		a.stop()
	}
}

func (a *activeRun) isLost() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lost
}

// end marks the model done: a cancel from now on waits for the end. It
// reports false if the claim was lost first.
func (a *activeRun) end() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ending = true
	return !a.lost
}

func (a *activeRun) release() {
	a.mu.Lock()
	a.released = true
	a.mu.Unlock()
}

// claim returns the run's claim while its lease is to be renewed: its
// start is committed and it was not released.
func (a *activeRun) claim() (RunClaim, bool) {
	a.mu.Lock()
	released := a.released
	a.mu.Unlock()
	if released || !a.log.Committed() {
		return RunClaim{}, false
	}
	return RunClaim{RunID: a.run.ID, Claim: a.run.Claim}, true
}

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
func (s *Service) StartRun(ctx context.Context, caller string, threadID uuid.UUID, req RunRequest) (run *Run, existing bool, err error) {
	if err := req.Validate(); err != nil {
		return nil, false, err
	}
	req.clean()
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
func (s *Service) startOnce(ctx context.Context, caller string, threadID uuid.UUID, req RunRequest) (run *Run, existing bool, err error) {
	if err := s.limitCallerRuns(caller); err != nil {
		return nil, false, err
	}
	model, modelName, err := s.models.Resolve(req.Config.Model)
	if err != nil {
		return nil, false, err
	}
	if ar := s.localRun(caller, threadID); ar != nil {
		// This process runs the thread's run. Its start may not be
		// committed yet, and may never be (another start on the thread
		// won): it is named only once it exists.
		if ok, err := ar.waitStart(ctx); err != nil {
			return nil, false, err
		} else if !ok {
			return nil, false, errStartAgain
		}
		if m := req.Message; m != nil && m.ID != uuid.Nil && m.ID == ar.run.UserMessageID && ar.user != nil {
			if s.sameParent(caller, threadID, ar.user.ParentID, req.ParentID) && string(checkpoint.MarshalParts(ar.user.Content)) == string(checkpoint.MarshalParts(m.Content)) {
				return ar.run, true, nil
			}
			return nil, false, errcode.New(errcode.Conflict, "message id %s already exists with other content or parent", m.ID)
		}
		return nil, false, &errcode.Error{Code: errcode.RunInProgress,
			Message: fmt.Sprintf("run %s is in progress on this thread; cancel it or rejoin it", ar.run.ID),
			RunID:   ar.run.ID, MessageID: ar.run.MessageID}
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
	var th *Thread
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
		th = &Thread{ID: threadID, Caller: caller, Metadata: json.RawMessage(`{}`), CreatedAt: now, UpdatedAt: now}
		run, existing, cerr := s.startRun(ctx, caller, th, &checkpoint.Tree{}, req, model, modelName, true)
		if cerr == nil {
			s.own(th)
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

// startRun is StartRun on a thread whose tree is known; create says the
// thread does not exist yet and the run's write creates it.
func (s *Service) startRun(ctx context.Context, caller string, th *Thread, tree *checkpoint.Tree, req RunRequest,
	model Model, modelName string, create bool) (*Run, bool, error) {
	threadID := th.ID
	if !req.continuation() {
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
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return nil, false, ErrShuttingDown
	}
	now := s.now()
	r := Run{
		ID: uuid.New(), ThreadID: threadID, Status: RunRunning, ParentID: fork.AssistantParent,
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
	if req.continuation() {
		created.answers = &answers{results: req.ToolResults, approvals: req.Approvals}
	}
	created.first = &presub{sub: s.hub.Subscribe(r.ID)}
	if user != nil {
		if tree, err = tree.Append(*user); err != nil {
			created.first.claim().Close()
			return nil, false, err
		}
	}
	mreq, err := s.modelRequest(ctx, caller, tree, created, req.Config)
	if err != nil {
		// Finish the run as failed rather than refuse it after the fact.
		mreq = ModelRequest{}
		model = failingModel{err: err}
	}
	in := RunCreate{Caller: caller, Thread: threadID, User: user, Run: r}
	in.Run.first = nil // this process's subscription: a store that keeps the value (threadtest) must not hand it out
	if create {
		in.Create = th
	}
	ar, started := s.launch(th, user, created, tree, model, mreq, in)
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
func (s *Service) startFailed(ctx context.Context, caller string, threadID uuid.UUID, created *Run, user *checkpoint.Node, req RunRequest, err error) (*Run, bool, error) {
	if err == ErrShuttingDown {
		created.first.claim().Close()
		return nil, false, err
	}
	if other, ok := err.(*threadBusy); ok {
		// Another start on the thread was launched first: its outcome
		// decides, so wait for it. Another caller's run that started
		// makes the thread theirs; else go again.
		created.first.claim().Close()
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
func (s *Service) userNode(ctx context.Context, caller string, threadID uuid.UUID, m *UserMessage) (*checkpoint.Node, error) {
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
func (s *Service) resolveFork(ctx context.Context, th *Thread, tree *checkpoint.Tree, req *RunRequest, model *Model, modelName *string) (checkpoint.Fork, uuid.UUID, error) {
	if !req.continuation() {
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
func (s *Service) leaveThread(r *Run) {
	s.mu.Lock()
	if ar := s.byThread[r.ThreadID]; ar != nil && ar.run == r {
		delete(s.byThread, r.ThreadID)
	}
	s.mu.Unlock()
}

// localRun returns the caller's thread's run that this process runs, or nil.
func (s *Service) localRun(caller string, threadID uuid.UUID) *activeRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ar := s.byThread[threadID]; ar != nil && ar.thread.Caller == caller {
		return ar
	}
	return nil
}

// retried answers a retry of a message id that already exists: the same
// content returns the run it started; anything else is a conflict.
func (s *Service) retried(ctx context.Context, th *Thread, prev *checkpoint.Node, req RunRequest) (*Run, bool, error) {
	same := prev.Role == checkpoint.RoleUser && s.sameParent(th.Caller, th.ID, prev.ParentID, req.ParentID) &&
		string(checkpoint.MarshalParts(prev.Content)) == string(checkpoint.MarshalParts(req.Message.Content))
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

// modelRequest builds what the model sees: the system message, then the path
// from the root to the message being answered, trimmed from the oldest end
// to the model's context budget.
func (s *Service) modelRequest(ctx context.Context, caller string, tree *checkpoint.Tree, r *Run, cfg RunConfig) (ModelRequest, error) {
	// A continued turn is its newest checkpoint; the turn a continuation
	// runs is not history but the run's own (see seeded).
	path := checkpoint.CollapseTurns(tree.PathRefs(r.ParentID))
	if n := len(path); n > 0 && path[n-1].Role == checkpoint.RoleAssistant {
		path = path[:n-1]
	}
	msgs := make([]ModelMessage, 0, len(path)+1)
	for _, n := range path {
		mm := ModelMessage{Role: n.Role, Parts: n.Content, Attachments: n.Attachments}
		msgs = append(msgs, mm)
	}
	if budget := s.models.ContextBudget(r.Model); budget > 0 {
		size := len(cfg.System)
		keep := len(msgs)
		for keep > 0 {
			size += messageSize(msgs[keep-1])
			if size > budget && keep < len(msgs) {
				break
			}
			keep--
		}
		// Trimmed conversations start with a user message: providers such
		// as Anthropic refuse one that starts with the assistant.
		for keep < len(msgs)-1 && keep > 0 && msgs[keep].Role != checkpoint.RoleUser {
			keep++
		}
		msgs = msgs[keep:]
	}
	if cfg.System != "" {
		msgs = append([]ModelMessage{{Role: checkpoint.RoleSystem, Parts: []checkpoint.Part{{Type: "text", Text: cfg.System}}}}, msgs...)
	}
	if s.atts != nil {
		// Newest first: if the budget runs out, older files go unread.
		var budget *int64
		if left := s.cfg.Limits.InlineBytes; left >= 0 {
			budget = &left
		}
		for i := len(msgs) - 1; i >= 0; i-- {
			if err := s.inlineAttachments(ctx, caller, &msgs[i], budget); err != nil {
				return ModelRequest{}, err
			}
		}
	}
	return ModelRequest{Messages: msgs, Temperature: cfg.Temperature, Call: r.TreeSeq}, nil
}

func messageSize(m ModelMessage) int {
	n := 16
	for _, p := range m.Parts {
		n += len(p.Text) + len(p.Image) + len(p.ToolName) + len(p.ArgsText) + len(p.Result)
	}
	return n
}

// inlineAttachments turns attachment references into what the model reads:
// images as data: URL image parts, text files as text parts.
// At most *budget bytes are inlined (nil: no limit); a file over what is
// left is named instead, and the budget is spent as files are inlined.
func (s *Service) inlineAttachments(ctx context.Context, caller string, m *ModelMessage, budget *int64) error {
	if len(m.Attachments) == 0 {
		return nil
	}
	parts := append([]checkpoint.Part(nil), m.Parts...)
	for _, a := range m.Attachments {
		id, err := uuid.Parse(a.ID)
		if err != nil {
			continue
		}
		if budget != nil && a.Size > *budget {
			parts = append(parts, overInline(a, s.cfg.Limits.InlineBytes))
			continue
		}
		meta, data, err := s.atts.AttachmentData(ctx, caller, id)
		if err != nil {
			return fmt.Errorf("attachment %s: %w", a.ID, err)
		}
		if budget != nil {
			if int64(len(data)) > *budget {
				parts = append(parts, overInline(*meta, s.cfg.Limits.InlineBytes))
				continue
			}
			*budget -= int64(len(data))
		}
		switch ct := meta.ContentType; {
		case strings.HasPrefix(ct, "image/"):
			parts = append(parts, checkpoint.Part{Type: "image", Image: dataURL(ct, data)})
		case strings.HasPrefix(ct, "text/") || ct == "application/json":
			parts = append(parts, checkpoint.Part{Type: "text", Text: fmt.Sprintf("[%s]\n%s", meta.Name, data)})
		default:
			// Binary files (PDF, …) are named, not pasted as text.
			parts = append(parts, checkpoint.Part{Type: "text", Text: fmt.Sprintf("[attached file %s (%s, %d bytes); its content is not shown to the model]", meta.Name, ct, len(data))})
		}
	}
	m.Parts = parts
	m.Attachments = nil // inlined above
	return nil
}

type failingModel struct{ err error }

func (f failingModel) Stream(context.Context, ModelRequest, func(string) error) (ModelResult, error) {
	return ModelResult{}, &errcode.Error{Code: errcode.ModelError, Message: errcode.Message(f.err)}
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
func (s *Service) launch(th *Thread, user *checkpoint.Node, r *Run, tree *checkpoint.Tree, model Model, req ModelRequest, in RunCreate) (*activeRun, <-chan error) {
	ctx, stop := context.WithCancel(context.Background())
	ar := &activeRun{run: r, ctx: ctx, stop: stop, done: make(chan struct{}), thread: th, user: user,
		started: make(chan struct{})}
	ar.log = s.newLogWriter(r, ar.lose)
	started := make(chan error, 1)
	s.mu.Lock()
	if s.closing {
		// Checked under the lock Shutdown sets closing with: a run either
		// is counted before Shutdown waits, or never starts.
		s.mu.Unlock()
		stop()
		started <- ErrShuttingDown
		return nil, started
	}
	if other := s.byThread[r.ThreadID]; other != nil {
		s.mu.Unlock()
		stop()
		started <- &threadBusy{ar: other}
		return nil, started
	}
	s.runs[r.ID] = ar
	s.byThread[r.ThreadID] = ar
	s.runsDone.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.runsDone.Done()
		defer close(ar.done)
		defer stop()
		s.execute(ar, tree, model, req, in, started)
		s.mu.Lock()
		delete(s.runs, r.ID)
		s.mu.Unlock()
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
	sub stream.Subscription[Event]
}

func (p *presub) claim() stream.Subscription[Event] {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	sub := p.sub
	p.sub = nil
	return sub
}

func (s *Service) publish(w *logWriter, batch []Record, since time.Time) {
	r := w.run
	evs := make([]Event, len(batch))
	tokens := 0
	for i := range batch {
		rec := &batch[i]
		if rec.Kind == KindSnapshot {
			evs[i] = Event{Type: KindSnapshot, RunID: r.ID, Sequence: rec.Seq, Snapshot: w.snapshot(rec.Seq)}
			continue
		}
		evs[i] = recordEvent(r, rec)
		if rec.Kind == KindToken {
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
func (s *Service) execute(ar *activeRun, tree *checkpoint.Tree, model Model, req ModelRequest, in RunCreate, started chan<- error) {
	r := ar.run
	w := ar.log
	t := &turnRun{s: s, ar: ar, w: w, tree: tree, seq: 1, fold: seeded(r, tree)}
	firstRec := firstRecord(r)
	firstEv := Event{Type: KindSnapshot, RunID: r.ID, Sequence: 1, Snapshot: &Snapshot{
		ThreadID: r.ThreadID, RunStatus: RunRunning, Tree: tree, Running: runningNode(r, tree, t.fold.content()), Head: r.MessageID}}
	commitStart := func() {
		if !w.ClaimStart(engine.StartCommitting) {
			return // the run ended first and is written whole
		}
		err := s.starts.Write(startReq{in, firstRec})
		if err != nil {
			// Refused or not saved: nothing of the run is to be. Free the
			// thread before the caller hears of it. A write that failed
			// for want of the database may have committed all the same:
			// then the run is released once the database answers.
			var mw *engine.MaybeWritten
			ar.unsure.Store(retryable(err) || errors.As(err, &mw))
			ar.cancel(RunFailed)
			s.leaveThread(r)
			w.Started(false)
			started <- err
			return
		}
		s.remember(r.ThreadID, tree)
		s.hub.Publish(r.ID, firstEv)
		w.Started(true)
		started <- nil
	}
	var linger *time.Timer
	if s.cfg.StartLinger > 0 {
		linger = time.AfterFunc(s.cfg.StartLinger, commitStart)
	} else {
		commitStart()
	}
	res, err := s.drive(t, model, req, r.Config)
	merged := w.ClaimStart(engine.StartMerged)
	if merged {
		linger.Stop()
	} else {
		<-w.StartDone()
	}
	tail := w.Stop()
	all := w.All()
	if w.Failed() {
		s.hub.End(r.ID) // nothing was published
		return
	}
	if !ar.end() {
		// Recovery elsewhere took the run over: it ends it from the log,
		// which holds everything published here. Followers here read it
		// there once their subscriptions end.
		s.log.Warn("run lost its claim; stopped", "run_id", r.ID, "thread_id", r.ThreadID)
		s.hub.End(r.ID)
		return
	}

	status, st, runErr := endStatus(ar, res, err)
	if runErr != nil {
		st = &checkpoint.Status{Type: "incomplete", Reason: "error", Error: runErr.Message}
		errRec := Record{Seq: t.seq + 1, Kind: KindError, Text: runErr.Message, Code: runErr.Code}
		tail, all = append(tail, errRec), append(all, errRec)
	}
	var usage *Usage
	if res.PromptTokens > 0 || res.CompletionTokens > 0 {
		usage = &Usage{PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens}
	}
	modelName := r.Model
	if res.Model != "" && res.Model != r.Model {
		modelName = r.Model + " (" + storable(res.Model) + ")"
	}
	// The first turn names its thread whatever its outcome (a stopped or
	// failed first reply still leaves the question to name it by); the
	// title model is asked only about a reply that succeeded.
	first := r.UserMessageID != uuid.Nil && r.TreeSeq == 1
	byModel := first && status == RunSucceeded && s.cfg.TitleModel != ""
	content := t.fold.content()
	fin := finishing{run: r, ar: ar, log: w, tree: tree, status: status, st: st, content: content, all: all, tail: tail,
		model: modelName, usage: usage, err: runErr}
	if first && !byModel {
		// Titled in the final transaction, so a client that reads the
		// thread after the stream ends sees it.
		fin.title = TitleFrom(tree.Nodes()[0].Text())
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
func endStatus(ar *activeRun, res ModelResult, err error) (RunStatus, *checkpoint.Status, *RunError) {
	me, coded := errcode.As(err)
	switch {
	case ar.ctx.Err() != nil && ar.reason() != "":
		return RunCancelled, &checkpoint.Status{Type: "incomplete", Reason: "cancelled"}, nil
	case coded && me.Code.IsModel():
		return RunFailed, nil, &RunError{Code: me.Code, Message: storable(me.Message)}
	case err != nil:
		return RunFailed, nil, &RunError{Code: errcode.ModelError, Message: storable(err.Error())}
	case res.StopReason == "length":
		return RunSucceeded, &checkpoint.Status{Type: "incomplete", Reason: "length"}, nil
	case res.StopReason == "tool-calls":
		st := waitingStatus
		return RunRequiresAction, &st, nil
	}
	return RunSucceeded, &checkpoint.Status{Type: "complete", Reason: "stop"}, nil
}

// firstRecord is a run's first log record: its running snapshot.
func firstRecord(r *Run) Record {
	return Record{Seq: 1, Kind: KindSnapshot, Status: RunRunning, TreeSeq: r.TreeSeq}
}

// finishing is what finish writes and publishes.
type finishing struct {
	run     *Run
	ar      *activeRun // nil when recovering another process's run
	log     *logWriter // nil when recovering another process's run
	tree    *checkpoint.Tree
	status  RunStatus
	st      *checkpoint.Status
	content []checkpoint.Part // the reply
	all     []Record          // the whole log from sequence 1
	tail    []Record          // what was not published yet
	model   string
	usage   *Usage
	err     *RunError
	title   string // the thread's title if it has none
	// create is the run's unwritten start, written with the end; first is
	// then its first event, published before the tail, and started is
	// told the outcome.
	create  *RunCreate
	first   *Event
	started chan<- error
}

// finish writes the assistant checkpoint and the compacted log, then
// publishes what was not yet published and ends the run's subscriptions.
// It returns the write's error when the end could not be written: nothing
// more is published then (see writeEnd).
func (s *Service) finish(f finishing) error {
	r, tree, status, all, tail := f.run, f.tree, f.status, f.all, f.tail
	asst := checkpoint.Node{
		ID: checkpointOf(r, tree), ThreadID: r.ThreadID, ParentID: r.ParentID, Seq: r.TreeSeq + 1, Role: checkpoint.RoleAssistant,
		Content: f.content, Status: f.st, RunID: r.ID, CreatedAt: r.CreatedAt,
	}
	final := Record{Seq: all[len(all)-1].Seq + 1, Kind: KindSnapshot, Status: status, TreeSeq: asst.Seq}
	all = append(all, final)
	tail = append(tail, final)
	in := RunFinish{Run: r, Status: status, Assistant: asst, Records: all, Model: f.model, Usage: f.usage, Error: f.err, Title: f.title}
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
		s.remember(r.ThreadID, nt)
		tree = nt
	}
	events := make([]Event, 0, len(tail)+1)
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
func (s *Service) tailEvent(f finishing, rec *Record, tree *checkpoint.Tree, all []Record) Event {
	r := f.run
	switch {
	case rec.Kind != KindSnapshot:
		return recordEvent(r, rec)
	case rec.Status.Done():
		return Event{Type: KindSnapshot, RunID: r.ID, Sequence: rec.Seq,
			Snapshot: &Snapshot{ThreadID: r.ThreadID, RunStatus: f.status, Tree: tree, Head: r.MessageID}}
	}
	if f.log != nil {
		if snap := f.log.snapshot(rec.Seq); snap != nil {
			return Event{Type: KindSnapshot, RunID: r.ID, Sequence: rec.Seq, Snapshot: snap}
		}
	}
	fold := seeded(r, tree)
	for i := range all[:rec.Seq-1] {
		fold.add(&all[i])
	}
	return s.event(r, *rec, tree, fold.content())
}

// endUnwritten settles a run whose end could not be written: nothing more
// of it is published and its subscriptions end (followers read the rest
// from the store). A committed start that is still this process's is
// released: its lease is not renewed, so recovery, here or elsewhere, ends
// it from its durable log once the lease lapses. An unwritten start left
// nothing behind, and StartRun returns the error.
func (s *Service) endUnwritten(f finishing, err error) {
	r := f.run
	var lost *ClaimLostError
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
func (s *Service) writeEnd(f finishing, in RunFinish) error {
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
func (s *Service) releaseUnsure(r *Run) {
	deadline := time.Now().Add(s.cfg.Lease)
	wait := s.cfg.RetryMin
	for {
		ctx, cancel := context.WithTimeout(s.abandonCtx, max(s.cfg.Lease/3, time.Second))
		_, lost, err := s.store.RunLeaseRenew(ctx, []RunClaim{{RunID: r.ID, Claim: r.Claim}}, time.Unix(0, 0).UTC())
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
	var lost *ClaimLostError
	if errors.As(err, &lost) || errors.Is(err, engine.ErrBatcherStopped) {
		return false
	}
	e, coded := errcode.As(err)
	return !coded || e.Code == errcode.Unavailable
}

// titlePrompt is what the title model is asked before the exchange.
const titlePrompt = "Write a title of at most six words for the conversation below. Answer with the title only, no quotes."

// autoTitle names an untitled thread after its first exchange: with the
// configured title model when there is one (reply is the assistant's first
// reply), else, or when that model fails, from the first words of the
// first user message.
func (s *Service) autoTitle(caller string, threadID uuid.UUID, tree *checkpoint.Tree, reply string) {
	// Bounded by Shutdown's grace too (abandonCtx).
	ctx, cancel := context.WithTimeout(s.abandonCtx, 30*time.Second)
	defer cancel()
	if tree.Len() == 0 {
		return
	}
	question := tree.Nodes()[0].Text()
	title := ""
	if s.cfg.TitleModel != "" {
		t, err := s.modelTitle(ctx, question, reply)
		if err != nil {
			s.log.Warn("title model failed; titling from the first words", "thread_id", threadID, "model", s.cfg.TitleModel, "err", err)
		}
		title = t
	}
	if title == "" {
		title = TitleFrom(question)
	}
	th, err := s.store.ThreadGet(ctx, caller, threadID)
	if err != nil || th.Title != nil || title == "" {
		return
	}
	if _, err := s.store.ThreadUpdate(ctx, caller, threadID, ThreadUpdate{Title: &title}); err != nil {
		s.log.Warn("auto title", "thread_id", threadID, "err", err)
	}
}

// modelTitle asks the title model for a title of the first exchange.
func (s *Service) modelTitle(ctx context.Context, question, reply string) (string, error) {
	m, _, err := s.models.Resolve(s.cfg.TitleModel)
	if err != nil {
		return "", err
	}
	text := func(t string) []checkpoint.Part { return []checkpoint.Part{{Type: "text", Text: t}} }
	const most = 2000 // bytes of each side of the exchange the model sees
	req := ModelRequest{Messages: []ModelMessage{
		{Role: checkpoint.RoleSystem, Parts: text(titlePrompt)},
		{Role: checkpoint.RoleUser, Parts: text("User: " + cut(question, most) + "\n\nAssistant: " + cut(reply, most))},
	}}
	var b strings.Builder
	if _, err := m.Stream(ctx, req, func(t string) error {
		if b.Len() > 400 {
			return errors.New("title too long")
		}
		b.WriteString(t)
		return nil
	}); err != nil {
		return "", err
	}
	return TitleFrom(storable(strings.Trim(strings.TrimSpace(b.String()), `"'`))), nil
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// TitleFrom returns the first words of text, at most 60 characters.
func TitleFrom(text string) string {
	words := strings.Fields(text)
	var b strings.Builder
	for _, w := range words {
		if b.Len()+len(w)+1 > 60 {
			break
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	if b.Len() == 0 && len(words) > 0 {
		r := []rune(words[0])
		return string(r[:min(len(r), 60)])
	}
	return b.String()
}

// Run renews this process's run leases, recovers runs whose owner died
// and frees ended runs' rows of the group commit's log, until ctx ends.
func (s *Service) Run(ctx context.Context) {
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
func (s *Service) RenewLeases(ctx context.Context) {
	s.mu.Lock()
	claims := make([]RunClaim, 0, len(s.runs))
	for _, ar := range s.runs {
		if c, ok := ar.claim(); ok {
			claims = append(claims, c)
		}
	}
	s.mu.Unlock()
	if len(claims) == 0 {
		return
	}
	cancels, lost, err := s.store.RunLeaseRenew(ctx, claims, s.now().Add(s.cfg.Lease))
	if err != nil && ctx.Err() == nil {
		s.log.Error("renew run leases", "err", err)
	}
	for _, id := range cancels {
		s.cancelLocal(id, RunCancelled)
	}
	for _, id := range lost {
		s.mu.Lock()
		ar := s.runs[id]
		s.mu.Unlock()
		if ar != nil {
			ar.lose()
		}
	}
}

// Recover ends every run whose lease expired: its reply is written as
// incomplete/other with the text its log holds, and its log ends with an
// error event (run_interrupted) and an interrupted snapshot. It returns
// how many runs it recovered.
func (s *Service) Recover(ctx context.Context) int {
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

func (s *Service) recoverRun(ctx context.Context, r *Run) error {
	recs, err := s.store.RunEventsAfter(ctx, r.ID, 0)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		recs = []Record{{Seq: 1, Kind: KindSnapshot, Status: RunRunning, TreeSeq: r.TreeSeq}}
	}
	for i := range recs {
		// A log written before its tokens were cleaned (storable).
		recs[i].Text, recs[i].Code = storable(recs[i].Text), errcode.Code(storable(string(recs[i].Code)))
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
	tree, err := s.tree(ctx, th)
	if err != nil {
		return err
	}
	// Calls that have no result were cut off: they are answered, never
	// run again.
	fold := seeded(r, tree)
	for i := range recs {
		fold.add(&recs[i])
	}
	var tail []Record
	for _, id := range fold.unanswered() {
		tail = append(tail, Record{Seq: recs[len(recs)-1].Seq + int64(len(tail)) + 1, Kind: KindToolResult, CallID: id,
			Data: json.RawMessage(`"interrupted"`), IsError: true})
	}
	tail = append(tail, Record{Seq: recs[len(recs)-1].Seq + int64(len(tail)) + 1, Kind: KindError, Code: errcode.RunInterrupted,
		Text: "the run was interrupted: the process running it stopped before it ended; the reply keeps what it had streamed"})
	for i := range tail {
		fold.add(&tail[i])
	}
	recs = append(recs, tail...)
	content := fold.content()
	st := &checkpoint.Status{Type: "incomplete", Reason: "other"}
	err = s.finish(finishing{run: r, tree: tree.Upto(r.TreeSeq), status: RunInterrupted, st: st, content: content, all: recs,
		tail: tail, model: r.Model})
	if err != nil {
		return err
	}
	s.log.Warn("recovered interrupted run", "run_id", r.ID, "thread_id", r.ThreadID, "bytes_kept", len(replyText(content)))
	return nil
}

// Shutdown stops new runs, lets running ones finish until ctx ends, then
// cancels the rest (and any title call) and waits for their final writes,
// which are no longer retried then, ends the followers of other
// processes' runs (their streams end with ErrShuttingDown, to be rejoined
// elsewhere), and stops the engine's goroutines.
func (s *Service) Shutdown(ctx context.Context) {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.runsDone.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.abandonNow()
		s.mu.Lock()
		for _, ar := range s.runs {
			ar.cancel(RunCancelled)
		}
		s.mu.Unlock()
		<-done
	}
	s.drainOnce.Do(func() { close(s.drained) })
	s.commits.Stop()
	s.starts.Stop()
	s.ends.Stop()
	s.relay.Stop()
}

// Draining reports whether Shutdown was called: new runs are refused.
func (s *Service) Draining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// ActiveRuns returns how many runs this process owns.
func (s *Service) ActiveRuns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.runs)
}

func dataURL(contentType string, data []byte) string {
	return "data:" + contentType + ";base64," + base64.StdEncoding.EncodeToString(data)
}
