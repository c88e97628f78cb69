package thread

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread/engine"
	"github.com/threadline/threadline/thread/errcode"
)

// Config tunes a Service. Zero values take the defaults in parentheses.
type Config struct {
	// Owner names this process in run leases (a random id).
	Owner string
	// Lease is how long a run stays owned without renewal (15s).
	Lease time.Duration
	// TreeCache is how many thread trees stay in memory (1024).
	TreeCache int
	// Now is the clock (time.Now), truncated to microseconds as Postgres stores it.
	Now func() time.Time
	// Logger receives run lifecycle logs (slog.Default).
	Logger *slog.Logger
	// OnPublish, when set, is told how long each published batch of tokens
	// waited between the model producing its first token and its publication.
	OnPublish func(oldest time.Duration, tokens int)
	// OnRunEnd, when set, is told the final status of every run.
	OnRunEnd func(status RunStatus)
	// TitleModel names the model that titles a thread after its first
	// exchange ("": the first words of the first user message).
	TitleModel string
	// StartLinger is how long the model runs before anything of its run is
	// written (2ms; negative: the start is written first). A run that ends
	// within it is written whole, with one commit; a longer one commits its
	// start when the linger ends, and its client's first event waits that
	// long. Nothing is published before it is durable either way; the
	// price is that a start the database refuses (another process changed
	// the thread) has cost up to a linger of the model's time.
	StartLinger time.Duration
	// RetryMin and RetryMax bound the backoff between attempts at a run's
	// end write (50ms, 2s); the attempts stop after a lease.
	RetryMin, RetryMax time.Duration
	// Limits bound callers, threads and model calls (limits.go).
	Limits Limits
	// Tools, when set, are the server tools agent runs may call.
	Tools Tools
	// Raw, when set, keeps what runs' providers and tools exchanged.
	Raw RawSink
	// Wakeups, when set, brings other processes' writes here within
	// milliseconds (see Watch); nil: followers poll (wake.go).
	Wakeups Wakeups
	// RelayBuffer is how many batches a follower of another process's run
	// may fall behind that run's reader in this process before it is
	// dropped and reads the log itself (1024; relay.go).
	RelayBuffer int
}

// Service is the thread and run API over a Store, a Hub and Models.
type Service struct {
	store   Store
	hub     Hub
	models  Models
	atts    Attachments
	cfg     Config
	log     *slog.Logger
	commits *committer
	relay   *engine.Relay[Event]
	starts  *engine.Batcher[startReq]
	ends    *engine.Batcher[RunFinish]

	// abandonCtx ends when Shutdown's grace does: title calls stop and
	// failed end writes are no longer retried.
	abandonCtx context.Context
	abandonNow context.CancelFunc
	// drained closes once Shutdown has ended every run of this process:
	// followers still open then follow other processes' runs, and end.
	drained   chan struct{}
	drainOnce sync.Once

	mu       sync.Mutex
	trees    map[uuid.UUID]*checkpoint.Tree
	owners   map[uuid.UUID]string // caller of each cached tree's thread, as the store said
	runs     map[uuid.UUID]*activeRun
	byThread map[uuid.UUID]*activeRun // at most one run per thread
	closing  bool
	runsDone sync.WaitGroup
}

// Attachments loads attachment bytes for the model. It may be nil.
type Attachments interface {
	// AttachmentData returns the content type and bytes; not_found for
	// another caller's or an unknown attachment.
	AttachmentData(ctx context.Context, caller string, id uuid.UUID) (*checkpoint.Attachment, []byte, error)
}

// New returns a Service with its writers started. Call Run to start lease
// renewal and recovery, and Shutdown to stop.
func New(store Store, hub Hub, models Models, atts Attachments, cfg Config) *Service {
	if cfg.Owner == "" {
		cfg.Owner = uuid.NewString()
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 15 * time.Second
	}
	if cfg.TreeCache <= 0 {
		cfg.TreeCache = 1024
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StartLinger == 0 {
		cfg.StartLinger = 2 * time.Millisecond
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = 50 * time.Millisecond
	}
	if cfg.RetryMax < cfg.RetryMin {
		cfg.RetryMax = max(2*time.Second, cfg.RetryMin)
	}
	if cfg.RelayBuffer <= 0 {
		cfg.RelayBuffer = 1024
	}
	cfg.Limits.defaults()
	s := &Service{store: store, hub: hub, models: models, atts: atts, cfg: cfg, log: cfg.Logger,
		trees: make(map[uuid.UUID]*checkpoint.Tree), owners: make(map[uuid.UUID]string), runs: make(map[uuid.UUID]*activeRun), byThread: make(map[uuid.UUID]*activeRun)}
	s.abandonCtx, s.abandonNow = context.WithCancel(context.Background())
	s.drained = make(chan struct{})
	s.commits = newCommitter(s)
	s.relay = newRelay(s)
	s.starts = newStarts(store)
	s.ends = newEnds(store)
	// Shutdown stops them once the runs have ended.
	s.commits.Start()
	s.starts.Start()
	s.ends.Start()
	s.relay.Start()
	return s
}

// Models returns the model registry.
func (s *Service) Models() Models { return s.models }

func (s *Service) now() time.Time { return s.cfg.Now().UTC().Truncate(time.Microsecond) }

// CreateThread creates a thread for caller; id uuid.Nil picks one. It
// returns the existing thread and false when the id is the caller's already,
// not_found when it is someone else's (as every other use of a foreign id
// answers: a caller learns nothing of others' threads).
func (s *Service) CreateThread(ctx context.Context, caller string, id uuid.UUID, metadata json.RawMessage) (*Thread, bool, error) {
	if id == uuid.Nil {
		id = uuid.New()
	}
	now := s.now()
	t := &Thread{ID: id, Caller: caller, Metadata: metadata, CreatedAt: now, UpdatedAt: now}
	th, created, err := s.store.ThreadCreate(ctx, t)
	if errcode.Of(err) == errcode.Conflict {
		return nil, false, errcode.New(errcode.NotFound, "thread %s not found", id)
	}
	return th, created, err
}

// GetThread returns not_found for unknown or foreign threads.
func (s *Service) GetThread(ctx context.Context, caller string, id uuid.UUID) (*Thread, error) {
	return s.store.ThreadGet(ctx, caller, id)
}

// ListThreads returns a page of threads, most recently updated first, and
// the cursor of the next page ("" at the end). A malformed cursor is
// invalid_request.
func (s *Service) ListThreads(ctx context.Context, caller string, limit int, cursor string) ([]*Thread, string, error) {
	if limit <= 0 {
		limit = 20
	}
	if limit > 100 {
		return nil, "", errcode.New(errcode.Invalid, "limit must be between 1 and 100, got %d", limit)
	}
	var after *ThreadCursor
	if cursor != "" {
		c, err := decodeCursor(cursor)
		if err != nil {
			return nil, "", err
		}
		after = c
	}
	ts, err := s.store.ThreadList(ctx, caller, limit+1, after)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(ts) > limit {
		ts = ts[:limit]
		last := ts[len(ts)-1]
		next = encodeCursor(ThreadCursor{UpdatedAt: last.UpdatedAt, ID: last.ID})
	}
	return ts, next, nil
}

func encodeCursor(c ThreadCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.UpdatedAt.UTC().Format(time.RFC3339Nano) + "|" + c.ID.String()))
}

func decodeCursor(s string) (*ThreadCursor, error) {
	bad := errcode.New(errcode.Invalid, "cursor %q is not a cursor this service returned", s)
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	ts, id, ok := strings.Cut(string(b), "|")
	if !ok {
		return nil, bad
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return nil, bad
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return nil, bad
	}
	return &ThreadCursor{UpdatedAt: t, ID: u}, nil
}

// UpdateThread applies a PATCH; not_found for unknown or foreign threads.
func (s *Service) UpdateThread(ctx context.Context, caller string, id uuid.UUID, u ThreadUpdate) (*Thread, error) {
	return s.store.ThreadUpdate(ctx, caller, id, u)
}

// DeleteThread cancels the thread's local run, then deletes the thread and
// everything in it; not_found for unknown or foreign threads.
func (s *Service) DeleteThread(ctx context.Context, caller string, id uuid.UUID) error {
	if _, err := s.store.ThreadGet(ctx, caller, id); err != nil {
		return err
	}
	s.mu.Lock()
	var waits []*activeRun
	for _, ar := range s.runs {
		if ar.run.ThreadID == id {
			ar.cancel(RunCancelled) // or its end is being written: wait for it
			waits = append(waits, ar)
		}
	}
	s.mu.Unlock()
	for _, ar := range waits {
		select {
		case <-ar.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := s.store.ThreadDelete(ctx, caller, id); err != nil {
		return err
	}
	s.forget(id)
	return nil
}

// cached returns the caller's thread as the tree cache knows it (ID, Caller
// and LastSeq only), or a nil tree.
func (s *Service) cached(caller string, id uuid.UUID) (*Thread, *checkpoint.Tree) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.trees[id]
	if t == nil || s.owners[id] != caller {
		return nil, nil
	}
	return &Thread{ID: id, Caller: caller, LastSeq: t.LastSeq()}, t
}

func (s *Service) forget(id uuid.UUID) {
	s.mu.Lock()
	delete(s.trees, id)
	delete(s.owners, id)
	s.mu.Unlock()
}

// tree returns the thread's checkpoint tree, reading from the store only the
// checkpoints the cache does not have yet.
func (s *Service) tree(ctx context.Context, th *Thread) (*checkpoint.Tree, error) {
	return s.treeRead(ctx, th, -1, nil)
}

// cachedSeq is where the cached tree of the thread ends (0: none cached):
// the checkpoints after it are the ones to read with the thread.
func (s *Service) cachedSeq(id uuid.UUID) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.trees[id]; t != nil {
		return t.LastSeq()
	}
	return 0
}

// read reads the caller's thread, its tree and its running run in one
// round trip (Store.ThreadRead), with the checkpoints the cache lacks.
func (s *Service) read(ctx context.Context, caller string, id uuid.UUID) (*Thread, *checkpoint.Tree, *Run, error) {
	from := s.cachedSeq(id)
	th, nodes, run, err := s.store.ThreadRead(ctx, caller, id, from)
	if err != nil {
		return nil, nil, nil, err
	}
	t, err := s.treeRead(ctx, th, from, nodes)
	if err != nil {
		return nil, nil, nil, err
	}
	return th, t, run, nil
}

// treeRead is tree with the checkpoints after seq from already read
// (from < 0: none). If the cache no longer ends at from (it moved, or it
// is stale), they are read again.
func (s *Service) treeRead(ctx context.Context, th *Thread, from int64, nodes []checkpoint.Node) (*checkpoint.Tree, error) {
	s.mu.Lock()
	t := s.trees[th.ID]
	s.mu.Unlock()
	if t != nil && (t.Len() > 0 && t.Nodes()[0].ThreadID != th.ID || t.LastSeq() > th.LastSeq) {
		t = nil // a deleted and recreated thread
	}
	if t == nil {
		t = &checkpoint.Tree{}
		if th.LastSeq == 0 {
			// An empty thread: cached too, so its first run's successor
			// reads no thread row.
			s.remember(th.ID, t)
			s.own(th)
			return t, nil
		}
	}
	if t.LastSeq() == th.LastSeq && t.Len() == int(th.LastSeq) {
		s.own(th)
		return t, nil
	}
	if from != t.LastSeq() {
		var err error
		if nodes, err = s.store.CheckpointsAfter(ctx, th.ID, t.LastSeq()); err != nil {
			return nil, fmt.Errorf("load checkpoints: %w", err)
		}
	}
	nt, err := t.Append(nodes...)
	if err != nil {
		return nil, fmt.Errorf("load checkpoints: %w", err)
	}
	s.remember(th.ID, nt)
	s.own(th)
	return nt, nil
}

// own records the caller of a cached tree's thread, as read from the store.
func (s *Service) own(th *Thread) {
	s.mu.Lock()
	if s.trees[th.ID] != nil {
		s.owners[th.ID] = th.Caller
	}
	s.mu.Unlock()
}

func (s *Service) remember(id uuid.UUID, t *checkpoint.Tree) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.trees[id]; old != nil && old.LastSeq() > t.LastSeq() {
		return
	}
	if _, ok := s.trees[id]; !ok && len(s.trees) >= s.cfg.TreeCache {
		for k := range s.trees { // evict an arbitrary entry
			delete(s.trees, k)
			delete(s.owners, k)
			break
		}
	}
	s.trees[id] = t
}

// Checkpoints returns the thread's whole checkpoint tree; not_found for
// unknown or foreign threads.
func (s *Service) Checkpoints(ctx context.Context, caller string, id uuid.UUID) (*checkpoint.Tree, error) {
	_, t, _, err := s.read(ctx, caller, id)
	return t, err
}

// SetHead remembers the branch the client shows. The message must be in the
// thread (or be its running reply): not_found otherwise.
func (s *Service) SetHead(ctx context.Context, caller string, id, messageID uuid.UUID) error {
	_, t, r, err := s.read(ctx, caller, id)
	if err != nil {
		return err
	}
	if t.Get(messageID) == nil && (r == nil || r.MessageID != messageID) {
		return errcode.New(errcode.NotFound, "message %s not found in thread %s", messageID, id)
	}
	return s.store.ThreadSetHead(ctx, caller, id, messageID)
}

// Snapshot returns the thread as the client shows it: the whole tree, the
// path to the head and the active run with the text it has durably streamed.
// not_found for unknown or foreign threads.
func (s *Service) Snapshot(ctx context.Context, caller string, id uuid.UUID) (*ThreadSnapshot, error) {
	for attempt := 0; ; attempt++ {
		th, t, r, err := s.read(ctx, caller, id)
		if err != nil {
			return nil, err
		}
		snap := &ThreadSnapshot{Snapshot: Snapshot{ThreadID: id, Tree: t, Head: th.HeadID}}
		if r == nil {
			return snap, nil
		}
		recs, _, err := s.logged(ctx, r.ID, 0)
		if err != nil {
			return nil, err
		}
		if n := len(recs); n > 0 && recs[n-1].Kind == KindSnapshot && recs[n-1].Status.Done() {
			if attempt < 3 {
				continue // it ended between the reads; read again
			}
		}
		fold := seeded(r, t)
		var last int64
		for i := range recs {
			fold.add(&recs[i])
			last = recs[i].Seq
		}
		snap.Running = runningNode(r, t, fold.content())
		snap.ActiveRun = &ActiveRun{RunID: r.ID, MessageID: r.MessageID, Sequence: last}
		return snap, nil
	}
}

// runningNode is the run's assistant message while it runs, holding
// content (nil: one empty text part), with the id of the checkpoint it
// becomes in tree.
func runningNode(r *Run, tree *checkpoint.Tree, content []checkpoint.Part) *checkpoint.Node {
	if content == nil {
		content = []checkpoint.Part{{Type: checkpoint.PartText}}
	}
	return &checkpoint.Node{
		ID: checkpointOf(r, tree), ThreadID: r.ThreadID, ParentID: r.ParentID, Role: checkpoint.RoleAssistant,
		Content: content, Status: &checkpoint.Status{Type: "running"},
		RunID: r.ID, CreatedAt: r.CreatedAt, Running: true,
	}
}

// FindRun returns the run, to follow or cancel, without counting its
// log: a running run's LastSequence may be lower than its log's end (see
// GetRun). not_found for unknown runs or foreign threads.
func (s *Service) FindRun(ctx context.Context, caller string, threadID, runID uuid.UUID) (*Run, error) {
	if r := s.localFind(caller, threadID, runID); r != nil {
		return r, nil
	}
	if _, err := s.store.ThreadGet(ctx, caller, threadID); err != nil {
		return nil, err
	}
	return s.store.RunGet(ctx, threadID, runID)
}

// localFind answers FindRun from memory for a run this process runs, of
// the caller's thread, while its start is durable and its end is not yet:
// the store would say the same (running), and a rejoin or a cancel then
// costs no read. Before the start commits and once the end has, the store
// answers.
func (s *Service) localFind(caller string, threadID, runID uuid.UUID) *Run {
	s.mu.Lock()
	ar := s.runs[runID]
	s.mu.Unlock()
	if ar == nil || ar.run.ThreadID != threadID || ar.thread.Caller != caller || !ar.log.Live() {
		return nil
	}
	r := *ar.run
	r.first = nil // the StartRun caller's to claim
	return &r
}

// GetRun returns the run with its last durable sequence; not_found for
// unknown runs or foreign threads.
func (s *Service) GetRun(ctx context.Context, caller string, threadID, runID uuid.UUID) (*Run, error) {
	r, err := s.FindRun(ctx, caller, threadID, runID)
	if err != nil || r.Status.Done() {
		return r, err
	}
	// The store counts a running run's group commits only when it reads
	// its log.
	recs, _, err := s.logged(ctx, runID, r.LastSequence)
	if err != nil {
		return nil, err
	}
	if n := len(recs); n > 0 {
		r.LastSequence = recs[n-1].Seq
	}
	return r, nil
}

// Where logged found a run's records.
type logSource int

const (
	logStored logSource = iota // the store: the run is not running here
	logLive                    // this process's memory: the run goes on
	logEnded                   // this process's memory: the whole log
)

// logged returns the run's durable records after sequence after: from
// memory while this process runs it (a rejoin then reads nothing from the
// database), else from the store.
func (s *Service) logged(ctx context.Context, runID uuid.UUID, after int64) ([]Record, logSource, error) {
	s.mu.Lock()
	ar := s.runs[runID]
	s.mu.Unlock()
	if ar != nil {
		recs, ended := ar.log.After(after)
		if ended {
			return recs, logEnded, nil
		}
		return recs, logLive, nil
	}
	recs, err := s.store.RunEventsAfter(ctx, runID, after)
	return recs, logStored, err
}

// loggedPage is logged with the store's answer cut to a page of
// Limits.LogPageBytes; more says the store holds more after it.
func (s *Service) loggedPage(ctx context.Context, runID uuid.UUID, after int64) (recs []Record, src logSource, more bool, err error) {
	s.mu.Lock()
	ar := s.runs[runID]
	s.mu.Unlock()
	if ar != nil {
		// This process's memory: nothing is copied.
		recs, ended := ar.log.After(after)
		if ended {
			return recs, logEnded, false, nil
		}
		return recs, logLive, false, nil
	}
	recs, more, err = s.store.RunEventsPage(ctx, runID, after, s.cfg.Limits.LogPageBytes)
	return recs, logStored, more, err
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
	if ar := s.local(runID); ar != nil {
		if ar.cancel(RunCancelled) {
			return nil
		}
		// Its model is done and its end is being written (retried while
		// the database is away): answer once it is settled, so that the
		// caller's next read sees the run ended.
		select {
		case <-ar.done:
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

// local returns the run if this process runs it, else nil.
func (s *Service) local(runID uuid.UUID) *activeRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[runID]
}

// cancelLocal cancels the run if this process runs it.
func (s *Service) cancelLocal(runID uuid.UUID, why RunStatus) {
	if ar := s.local(runID); ar != nil {
		ar.cancel(why)
	}
}

// Follow calls fn with every event of the run after sequence after, first
// from the durable log, then live, until the run's final snapshot or ctx
// ends. It works for finished runs too. A subscriber that falls behind
// catches up from the log. more tells fn that another event is ready at
// once, so a writer can batch its flushes. not_found for unknown runs or
// foreign threads.
func (s *Service) Follow(ctx context.Context, caller string, threadID, runID uuid.UUID, after int64, fn func(ev Event, more bool) error) error {
	r, err := s.FindRun(ctx, caller, threadID, runID)
	if err != nil {
		return err
	}
	return s.follow(ctx, caller, r, after, fn)
}

// FollowRun is Follow for a run the caller already holds (from StartRun or
// GetRun), saving the look-ups.
func (s *Service) FollowRun(ctx context.Context, caller string, r *Run, after int64, fn func(ev Event, more bool) error) error {
	return s.follow(ctx, caller, r, after, fn)
}
