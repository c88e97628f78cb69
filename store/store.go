// Package store owns Postgres: the schema and its migrations, and the
// implementation of thread.Store with pgx. Database errors are mapped onto
// the domain's coded errors in one place, interpretError.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

var _ thread.Store = (*Store)(nil)

// Store is the Postgres store.
type Store struct {
	pool *pgxpool.Pool
	// logPool is the group commit's own connection (Open), so that token
	// commits never queue behind run starts for the shared pool; New uses
	// the one pool for both.
	logPool *pgxpool.Pool
	now     func() time.Time
	// spillAfter is about how long a run_log row lives: RunLogPurge moves
	// running runs' segments out of rows this old.
	spillAfter time.Duration
	// peers says another live process shares the database (Notifier):
	// only then does the group commit send wake-ups.
	peers atomic.Bool
	// search tunes MessageSearch's plan for common words (zero: defaults).
	search searchTuning
	// rawMax caps one run's raw records (SetRawMaxBytes).
	rawMax int64
	// hints speed up reading running runs' logs again (runlog.go).
	hints logHints
	// fence spares the group commit's claim check of runs checked since
	// the last claim taken anywhere (fence.go).
	fence runFence
}

// logSpillAfter is Store.spillAfter's value: runs shorter than this are
// never moved, and reading one run's log from the shared rows scans about
// this much of them at most.
const logSpillAfter = 5 * time.Second

// openConns is how many of the pool's connections Open opens and warms
// before it returns (fewer if the pool is smaller).
const openConns = 4

// Open connects a pool of maxConns connections to databaseURL, and one more
// connection for the group commit of the run event log, and checks that
// the database answers. It opens and warms openConns connections of the
// pool, and the log's, before it returns: a new connection's warm-up
// (afterConnect) costs Postgres many turns' worth of CPU, and otherwise the first
// requests after a start either wait for one or share the cores with it.
// (Not the pool's MinConns: pgxpool opens those in the background, and
// Open's own would race them.) Idle ones close after MaxConnIdleTime.
func Open(ctx context.Context, databaseURL string, maxConns int32) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	Configure(cfg)
	logCfg := cfg.Copy()
	// One connection, which the pool reopens when it closes (MinConns).
	// openAll below waits for the first one: the pool cannot open a second.
	logCfg.MaxConns, logCfg.MinConns = 1, 1
	// It only appends to the log, so it warms only that: a whole turn's
	// warm-up would leave another turn's dead rows in the tables.
	logCfg.AfterConnect = afterConnectLog
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := openAll(ctx, pool, int(min(cfg.MaxConns, openConns))); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	logPool, err := pgxpool.NewWithConfig(ctx, logCfg)
	if err == nil {
		err = openAll(ctx, logPool, 1)
		if err != nil {
			logPool.Close()
		}
	}
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	s := New(pool)
	s.logPool = logPool
	return s, nil
}

// openAll holds n connections of pool at once, which opens (and warms) as
// many as it lacks, pings them and gives them back.
func openAll(ctx context.Context, pool *pgxpool.Pool, n int) error {
	conns := make([]*pgxpool.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if conns[i], errs[i] = pool.Acquire(ctx); errs[i] == nil {
				errs[i] = conns[i].Ping(ctx)
			}
		}()
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			c.Release()
		}
	}
	return errors.Join(errs...)
}

// hotSQL is every statement passed to hot.
var hotSQL []string

// hot registers a statement of the turn path for afterConnect and returns it.
func hot(sql string) string {
	hotSQL = append(hotSQL, sql)
	return sql
}

// Configure sets up the connections of a pool the store will use: Open
// calls it, and so do tests that build their own pool. A connection is
// readied when it opens (afterConnect) and checked each time it is handed
// out (prepareConn).
func Configure(cfg *pgxpool.Config) {
	cfg.AfterConnect = afterConnect
	cfg.PrepareConn = prepareConn
}

// afterConnect readies a new connection: uuids move in binary, the hot
// statements are prepared, and a turn is run and rolled back (warm). It
// never fails a connection: before migrations, statements that cannot be
// prepared are left to pgx's statement cache and the warm-up is skipped.
func afterConnect(ctx context.Context, conn *pgx.Conn) error {
	ready(ctx, conn)
	_ = warm(ctx, conn)
	return nil
}

// afterConnectLog readies the group commit's connection (Open): the
// statements are prepared and a log append is run and rolled back.
func afterConnectLog(ctx context.Context, conn *pgx.Conn) error {
	ready(ctx, conn)
	_ = warmLog(ctx, conn)
	return nil
}

// ready installs the uuid codec and prepares the hot statements, named by
// their text, which is how pgx finds them.
func ready(ctx context.Context, conn *pgx.Conn) {
	registerUUID(conn.TypeMap())
	for _, sql := range hotSQL {
		if _, err := conn.Prepare(ctx, sql, sql); err != nil {
			break
		}
	}
}

// New wraps an existing pool.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, logPool: pool, now: time.Now, spillAfter: logSpillAfter}
}

// SetClock replaces the clock (for tests).
func (s *Store) SetClock(now func() time.Time) { s.now = now }

func (s *Store) clock() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// Pool returns the underlying pool (for readiness checks and metrics).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pools.
func (s *Store) Close() {
	if s.logPool != s.pool {
		s.logPool.Close()
	}
	s.pool.Close()
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// withTx runs fn in a transaction on a connection of pool, and commits it
// on success. The rollback uses a context that survives the caller's
// cancellation, so a cancelled request never leaves a transaction open on
// a pooled connection.
func withTx(ctx context.Context, pool *pgxpool.Pool, fn func(tx pgx.Tx) error) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", interpretError(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", interpretError(err))
	}
	return nil
}

// interpretError maps database errors onto the domain's coded errors.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return errcode.New(errcode.NotFound, "not found")
	}
	if isOutage(err) {
		return fmt.Errorf("%w: %w", errUnavailable, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505": // unique_violation
			if pe.ConstraintName == "runs_one_active" {
				return &errcode.Error{Code: errcode.RunInProgress, Message: "a run is already in progress on this thread"}
			}
			return &errcode.Error{Code: errcode.Conflict, Message: "already exists: " + pe.ConstraintName}
		case "23503": // foreign_key_violation
			if pe.ConstraintName == "checkpoints_thread_id_parent_id_fkey" {
				return &errcode.Error{Code: errcode.InvalidFork, Message: "parent is not a message of this thread"}
			}
			return &errcode.Error{Code: errcode.NotFound, Message: "the thread or run no longer exists"}
		case "23514", "22P02", "22023", "22P05", "22021", "22003": // check_violation, invalid text, invalid parameter, untranslatable character, bad encoding, out of range
			return &errcode.Error{Code: errcode.Invalid, Message: pe.Message}
		// Raised by the run guard functions (migration 0003).
		case "P0002":
			return &errcode.Error{Code: errcode.NotFound, Message: pe.Message}
		case "TL409":
			e := &errcode.Error{Code: errcode.RunInProgress, Message: pe.Message}
			// The guard names the active run in DETAIL as "<run id> <message id>".
			if run, msg, ok := strings.Cut(pe.Detail, " "); ok {
				e.RunID, _ = uuid.Parse(run)
				e.MessageID, _ = uuid.Parse(msg)
			}
			return e
		case "TL410", "TL411": // the run ended, or is another claim's (0009)
			lost := &thread.ClaimLostError{}
			if id, err := uuid.Parse(pe.Detail); err == nil {
				lost.Runs = []uuid.UUID{id}
			}
			return lost
		case "TL412":
			return &errcode.Error{Code: errcode.Conflict, Message: pe.Message}
		}
	}
	return err
}
