package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/threadline/threadline/thread"
)

var _ thread.Wakeups = (*Notifier)(nil)

// The NOTIFY channels of migration 0010.
const (
	chanRun    = "threadline_run"
	chanChange = "threadline_change"
)

// maxPayload is how long one NOTIFY payload may grow (Postgres refuses 8000
// bytes and more).
const maxPayload = 7900

// NotifierConfig tunes a Notifier. Zero values take the defaults in
// parentheses.
type NotifierConfig struct {
	// Owner is this process's name in run leases (engine.Config.Owner): the
	// presence lock is held under it. Required.
	Owner string
	// Check is how often the other processes' presence is checked (250ms).
	Check time.Duration
	// Settle is how long this process's own connection must have been up
	// again after a reconnect before it declares another process dead
	// (2s): after a Postgres restart every process needs a moment to take
	// its lock again.
	Settle time.Duration
	// Logger receives reconnects and deaths (slog.Default).
	Logger *slog.Logger
}

// Notifier is this process's one dedicated connection to Postgres. On it,
// it LISTENs for the wake-ups other processes' commits send (migration
// 0010) and fans them out to waiters, and it holds the process's presence
// lock, which Postgres releases when the connection dies: meanwhile it
// checks the other processes' locks and reports the dead ones, whose runs
// then need no lease to expire before they are recovered. It reconnects
// with backoff; every reconnect is reported to the waiters as a reset
// (wake-ups may have been lost). Start it before serving, Stop it after.
type Notifier struct {
	st   *Store
	conn *pgx.ConnConfig
	cfg  NotifierConfig
	key  int64
	log  *slog.Logger

	mu     sync.Mutex
	runs   map[uuid.UUID]map[*runWake]struct{}
	subs   map[*changeSub]struct{}
	cancel context.CancelFunc
	done   chan struct{}

	upSince atomic.Int64 // unix nanoseconds since the connection is up; 0: down
	absent  map[string]int
}

// NewNotifier returns a Notifier for the store's database; call Start.
func (s *Store) NewNotifier(databaseURL string, cfg NotifierConfig) (*Notifier, error) {
	if cfg.Owner == "" {
		return nil, errors.New("notifier: an owner is required")
	}
	cc, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if cfg.Check <= 0 {
		cfg.Check = 250 * time.Millisecond
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Notifier{st: s, conn: cc, cfg: cfg, log: cfg.Logger,
		runs: make(map[uuid.UUID]map[*runWake]struct{}), subs: make(map[*changeSub]struct{}), absent: map[string]int{}}, nil
}

// Start connects, takes the presence lock and listens, then keeps doing so
// in the background until Stop. It returns the first connection's error.
func (n *Notifier) Start(ctx context.Context) error {
	conn, err := n.connect(ctx)
	if err != nil {
		return err
	}
	// Settle is for reconnects: at a first start the others are not
	// taking their locks again.
	n.upSince.Store(time.Now().Add(-n.cfg.Settle).UnixNano())
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.mu.Lock()
	n.cancel, n.done = cancel, make(chan struct{})
	n.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); n.listen(bg, conn) }()
	go func() { defer wg.Done(); n.watch(bg) }()
	go func() { wg.Wait(); close(n.done) }()
	return nil
}

// Stop closes the connection (releasing the presence lock), ends every
// subscription and waits for the notifier's goroutines.
func (n *Notifier) Stop() {
	n.mu.Lock()
	cancel, done := n.cancel, n.done
	n.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	n.mu.Lock()
	for s := range n.subs {
		s.closeLocked()
	}
	n.mu.Unlock()
	// Leave cleanly: the others need not find this process dead.
	ctx, cc := context.WithTimeout(context.Background(), 2*time.Second)
	defer cc()
	_, _ = n.st.pool.Exec(ctx, `DELETE FROM run_owners WHERE owner = $1`, n.cfg.Owner)
}

// connect opens the dedicated connection: the presence lock, this
// process's row in run_owners, and LISTEN on both channels.
func (n *Notifier) connect(ctx context.Context) (*pgx.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, n.conn)
	if err != nil {
		return nil, fmt.Errorf("notifier: connect: %w", interpretError(err))
	}
	var got bool
	err = conn.QueryRow(cctx, `SELECT pg_try_advisory_lock(hashtextextended('threadline owner ' || $1, 0)), hashtextextended('threadline owner ' || $1, 0)`,
		n.cfg.Owner).Scan(&got, &n.key)
	if err == nil && !got {
		// Our previous connection's session has not ended yet.
		err = errors.New("presence lock still held by a previous connection")
	}
	if err == nil {
		_, err = conn.Exec(cctx, `INSERT INTO run_owners (owner, lock_key) VALUES ($1, $2)
			ON CONFLICT (owner) DO UPDATE SET lock_key = EXCLUDED.lock_key`, n.cfg.Owner, n.key)
	}
	if err == nil {
		_, err = conn.Exec(cctx, `LISTEN `+chanRun+`; LISTEN `+chanChange)
	}
	if err != nil {
		_ = conn.Close(context.Background())
		return nil, fmt.Errorf("notifier: %w", interpretError(err))
	}
	n.upSince.Store(time.Now().UnixNano())
	return conn, nil
}

// listen dispatches notifications until ctx ends, reconnecting with
// backoff; after a reconnect every waiter is told to read again.
func (n *Notifier) listen(ctx context.Context, conn *pgx.Conn) {
	backoff := 50 * time.Millisecond
	for {
		for conn != nil {
			nt, err := conn.WaitForNotification(ctx)
			if err != nil {
				n.upSince.Store(0)
				_ = conn.Close(context.Background())
				conn = nil
				if ctx.Err() != nil {
					return
				}
				n.log.Warn("notifier connection lost; reconnecting", "err", err)
				break
			}
			n.dispatch(nt.Channel, nt.Payload)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		c, err := n.connect(ctx)
		if err != nil {
			backoff = min(2*backoff, time.Second)
			continue
		}
		conn, backoff = c, 50*time.Millisecond
		n.log.Info("notifier reconnected")
		n.reset()
	}
}

// dispatch wakes the waiters a notification concerns.
func (n *Notifier) dispatch(channel, payload string) {
	switch channel {
	case chanRun:
		n.mu.Lock()
		for _, item := range strings.Split(payload, ",") {
			id, _, _ := strings.Cut(item, ":")
			u, err := uuid.Parse(id)
			if err != nil {
				continue
			}
			for w := range n.runs[u] {
				w.poke()
			}
		}
		n.mu.Unlock()
	case chanChange:
		kind, id, _ := strings.Cut(payload, ":")
		u, err := uuid.Parse(id)
		if err != nil {
			return
		}
		c := thread.Change{ID: u}
		switch kind {
		case "c":
			c.Kind = thread.ChangeCancel
		case "t":
			c.Kind = thread.ChangeThreadGone
		default:
			return
		}
		n.send(c)
	}
}

// reset wakes every waiter and tells every change subscriber to forget
// what it cached: notifications may have been lost while disconnected.
func (n *Notifier) reset() {
	n.mu.Lock()
	for _, ws := range n.runs {
		for w := range ws {
			w.poke()
		}
	}
	n.mu.Unlock()
	n.send(thread.Change{Kind: thread.ChangeReset})
}

// send delivers a change to every subscriber without blocking; one that
// has no room left is closed (its owner resubscribes and resets).
func (n *Notifier) send(c thread.Change) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for s := range n.subs {
		select {
		case s.ch <- c:
		default:
			s.closeLocked()
		}
	}
}

// watch checks the other processes' presence every Check until ctx ends.
func (n *Notifier) watch(ctx context.Context) {
	t := time.NewTicker(n.cfg.Check)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		dead, err := n.checkPresence(ctx)
		if err != nil {
			if ctx.Err() == nil {
				n.log.Warn("presence check", "err", err)
			}
			continue
		}
		if dead > 0 {
			n.send(thread.Change{Kind: thread.ChangeOwnerDead})
		}
	}
}

// sqlPresence lists the other registered processes with whether their
// presence lock is held in this database.
const sqlPresence = `WITH held AS (
	SELECT (l.classid::bigint << 32) | l.objid::bigint AS key FROM pg_locks l
	WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
		AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))
SELECT o.owner, EXISTS (SELECT 1 FROM held WHERE held.key = o.lock_key) FROM run_owners o WHERE o.owner <> $1`

// checkPresence finds the processes whose lock is not held, and once one
// was missing at two checks in a row (and this process's own connection
// has been up for Settle), removes its row and expires the leases of its
// running runs. It records whether any other process is alive (the group
// commit then sends wake-ups) and returns how many died.
func (n *Notifier) checkPresence(ctx context.Context) (int, error) {
	rows, err := n.st.pool.Query(ctx, sqlPresence, n.cfg.Owner)
	if err != nil {
		return 0, interpretError(err)
	}
	var owner string
	var alive bool
	peers := false
	var dead []string
	seen := map[string]bool{}
	_, err = pgx.ForEachRow(rows, []any{&owner, &alive}, func() error {
		seen[owner] = true
		if alive {
			peers = true
			delete(n.absent, owner)
			return nil
		}
		n.absent[owner]++
		if n.absent[owner] >= 2 {
			dead = append(dead, owner)
		}
		return nil
	})
	if err != nil {
		return 0, interpretError(err)
	}
	for o := range n.absent {
		if !seen[o] {
			delete(n.absent, o)
		}
	}
	n.st.peers.Store(peers)
	up := n.upSince.Load()
	if len(dead) == 0 || up == 0 || time.Since(time.Unix(0, up)) < n.cfg.Settle {
		return 0, nil
	}
	var runs int64
	err = n.st.pool.QueryRow(ctx, `WITH gone AS (
			DELETE FROM run_owners o WHERE o.owner = ANY($1) AND NOT EXISTS (
				SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
					AND (l.classid::bigint << 32) | l.objid::bigint = o.lock_key
					AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))
			RETURNING o.owner),
		expired AS (UPDATE runs SET lease_until = '-infinity' WHERE status = 'running' AND owner IN (SELECT owner FROM gone) RETURNING 1)
		SELECT count(*) FROM expired`, dead).Scan(&runs)
	if err != nil {
		return 0, interpretError(err)
	}
	for _, o := range dead {
		delete(n.absent, o)
	}
	n.log.Warn("processes died; their runs are recovered now", "owners", strings.Join(dead, ","), "runs", runs)
	return len(dead), nil
}

// WakeRun returns a subscription woken whenever the run's log grows, the
// run ends or is deleted (in any process), or wake-ups may have been lost.
func (n *Notifier) WakeRun(runID uuid.UUID) thread.Wake {
	w := &runWake{n: n, id: runID, ch: make(chan struct{}, 1)}
	n.mu.Lock()
	ws := n.runs[runID]
	if ws == nil {
		ws = make(map[*runWake]struct{})
		n.runs[runID] = ws
	}
	ws[w] = struct{}{}
	n.mu.Unlock()
	return w
}

// Changes returns a subscription to cancels, deleted threads, dead owners
// and resets. Its channel closes after Close, at Stop, or when it fell
// behind.
func (n *Notifier) Changes() thread.Changes {
	s := &changeSub{n: n, ch: make(chan thread.Change, 1024)}
	n.mu.Lock()
	n.subs[s] = struct{}{}
	n.mu.Unlock()
	return s
}

type runWake struct {
	n  *Notifier
	id uuid.UUID
	ch chan struct{}
}

func (w *runWake) C() <-chan struct{} { return w.ch }

func (w *runWake) poke() {
	select {
	case w.ch <- struct{}{}:
	default: // a wake-up is pending already
	}
}

func (w *runWake) Close() {
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	if ws := w.n.runs[w.id]; ws != nil {
		delete(ws, w)
		if len(ws) == 0 {
			delete(w.n.runs, w.id)
		}
	}
}

type changeSub struct {
	n      *Notifier
	ch     chan thread.Change
	closed bool
}

func (s *changeSub) C() <-chan thread.Change { return s.ch }

func (s *changeSub) Close() {
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	s.closeLocked()
}

func (s *changeSub) closeLocked() {
	if s.closed {
		return
	}
	s.closed = true
	close(s.ch)
	delete(s.n.subs, s)
}

// runPayloads are the group commit's NOTIFY payloads: "<run id>:<last
// seq>" of each segment, comma separated, each under maxPayload.
func runPayloads(segs []thread.Segment) []string {
	var out []string
	var b strings.Builder
	for _, sg := range segs {
		if len(sg.Records) == 0 {
			continue
		}
		item := sg.RunID.String() + ":" + strconv.FormatInt(sg.Records[len(sg.Records)-1].Seq, 10)
		if b.Len() > 0 && b.Len()+1+len(item) > maxPayload {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// sqlLogNotify wakes the other processes' followers of the runs in a group
// commit (see Store.peers).
var sqlLogNotify = hot(`SELECT pg_notify('` + chanRun + `', p) FROM unnest($1::text[]) p`)
