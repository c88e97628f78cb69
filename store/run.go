package store

// Run rows: a run's start, end, lease and cancel flag, and the reads of
// runs.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// The statements of a turn, prepared on every new connection (see hot).
var (
	sqlRunStart  = hot(`SELECT threadline_run_start($1, $2, $3, $4, $5, $6, $7, $8)`)
	sqlRunBegin  = hot(`SELECT threadline_run_begin($1, $2, $3)`)
	sqlRunFinish = hot(`SELECT threadline_run_finish($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`)
	sqlThreadEnd = hot(`UPDATE threads SET last_seq = $2, head_id = $3, updated_at = $4, title = coalesce(title, $5) WHERE id = $1`)
	sqlRunInsert = hot(`INSERT INTO runs (id, thread_id, status, user_message_id, parent_id, message_id, model, config, owner, lease_until, tree_seq, created_at, log_from)
		VALUES ($1, $2, 'running', $3, $4, $5, $6, $7, $8, $9, $10, $11, (SELECT coalesce(max(id), 0) FROM run_log))`)
	sqlRunInsertEnded = hot(`INSERT INTO runs (id, thread_id, status, user_message_id, parent_id, message_id, model, config, usage, error, tree_seq, created_at, finished_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`)
	sqlEventsInsert = hot(`INSERT INTO run_events (run_id, first_seq, last_seq, data) VALUES ($1, $2, $3, $4)`)
	sqlEventsDelete = hot(`DELETE FROM run_events WHERE run_id = $1`)
)

const runCols = `id, thread_id, status, coalesce(user_message_id, '00000000-0000-0000-0000-000000000000'), parent_id, message_id,
	model, config, usage, error, coalesce(owner, ''), coalesce(lease_until, 'epoch'), tree_seq, created_at, finished_at, claim`

// scanRun scans a row of runCols, then any extra columns into extra. A
// config, usage or error column that is not the JSON its type reads is an
// error.
func scanRun(row pgx.Row, extra ...any) (*thread.Run, error) {
	var r thread.Run
	var cfg, usage, rerr []byte
	dst := append([]any{&r.ID, &r.ThreadID, &r.Status, &r.UserMessageID, &r.ParentID, &r.MessageID, &r.Model,
		&cfg, &usage, &rerr, &r.Owner, &r.LeaseUntil, &r.TreeSeq, &r.CreatedAt, &r.FinishedAt, &r.Claim}, extra...)
	if err := row.Scan(dst...); err != nil {
		return nil, err
	}
	r.CreatedAt = r.CreatedAt.UTC()
	if cfg != nil {
		if err := unmarshalRunConfig(cfg, &r.Config); err != nil {
			return nil, fmt.Errorf("run %s config: %w", r.ID, err)
		}
	}
	var err error
	if usage != nil {
		if r.Usage, err = unmarshalUsage(usage); err != nil {
			return nil, fmt.Errorf("run %s usage: %w", r.ID, err)
		}
	}
	if rerr != nil {
		if r.Error, err = unmarshalRunError(rerr); err != nil {
			return nil, fmt.Errorf("run %s error: %w", r.ID, err)
		}
	}
	return &r, nil
}

func notFoundRun(id uuid.UUID) error {
	return errcode.New(errcode.NotFound, "run %s not found", id)
}

// RunCreate starts a run and commits it; see thread.Store. The checks of
// threadline_run_start and the start's writes go as one batch in one
// implicit transaction: one round trip.
func (s *Store) RunCreate(ctx context.Context, in thread.RunCreate, first thread.Record) (*thread.Run, error) {
	b := &pgx.Batch{}
	queueOpen(b, in)
	if err := queueStart(b, in, first); err != nil {
		return nil, err
	}
	err := s.sendBatch(ctx, b, "start run")
	if errcode.Of(err) == errcode.RunInProgress && !errorNamesRun(err) {
		// The one-active-run index caught what the guard could not see:
		// name the winner now that the batch's connection is back.
		if a, aerr := s.RunActive(context.WithoutCancel(ctx), in.Thread); aerr == nil {
			return nil, inProgress(a.ID, a.MessageID)
		}
	}
	if err != nil {
		return nil, err
	}
	r := in.Run
	r.LastSequence = first.Seq
	return &r, nil
}

// RunCreateAll writes several runs' starts in one batch and one implicit
// transaction; see thread.Store. Any refusal fails them all.
func (s *Store) RunCreateAll(ctx context.Context, ins []thread.RunCreate, firsts []thread.Record) error {
	b := &pgx.Batch{}
	for i, in := range ins {
		queueOpen(b, in)
		if err := queueStart(b, in, firsts[i]); err != nil {
			return err
		}
	}
	return s.sendBatch(ctx, b, "start runs")
}

// queueOpen queues threadline_run_start for a run, after the thread's
// creation when the run creates it: its checks, and the thread's new end
// and head. An id that exists by then is left as it is, and
// threadline_run_start checks it (another caller's: not_found).
func queueOpen(b *pgx.Batch, in thread.RunCreate) {
	want, message, parent := openArgs(b, in)
	r := &in.Run
	b.Queue(sqlRunStart, in.Thread, in.Caller, want, message, nilUUID(parent), r.TreeSeq, r.MessageID, r.CreatedAt)
}

// queueBegin is queueOpen for a run written whole (RunComplete): the
// batch's own inserts then check what threadline_run_start checks first (a
// new user message id, a parent in the thread), with the same errors, in
// the same transaction, so only threadline_run_begin (the thread's lock,
// its caller, its last checkpoint, no run in progress) goes before them.
func queueBegin(b *pgx.Batch, in thread.RunCreate) {
	want, _, _ := openArgs(b, in)
	b.Queue(sqlRunBegin, in.Thread, in.Caller, want)
}

// openArgs queues the thread's creation when the run creates it, and
// returns the thread's last checkpoint the run expects, its new user
// message's id (nil for none) and the parent the run appends under.
func openArgs(b *pgx.Batch, in thread.RunCreate) (want int64, message *uuid.UUID, parent uuid.UUID) {
	if t := in.Create; t != nil {
		md := t.Metadata
		if len(md) == 0 {
			md = json.RawMessage(`{}`)
		}
		pt, pr, pm, pc := parentCols(t)
		b.Queue(sqlThreadInsert, t.ID, t.Caller, t.Title, md, t.CreatedAt, pt, pr, pm, pc, t.Depth)
	}
	want, parent = in.Run.TreeSeq, in.Run.ParentID
	if in.User != nil {
		want--
		message, parent = &in.User.ID, in.User.ParentID
	}
	return want, message, parent
}

// queueStart queues the rest of a run's start (queueOpen moved the
// thread's end): the user message, the running run and the first log
// record.
func queueStart(b *pgx.Batch, in thread.RunCreate, first thread.Record) error {
	r := in.Run
	if in.User != nil {
		if err := queueCheckpoint(b, in.User); err != nil {
			return err
		}
	}
	cfg, err := marshalRunConfig(&r.Config)
	if err != nil {
		return fmt.Errorf("run %s config: %w", r.ID, err)
	}
	b.Queue(sqlRunInsert,
		r.ID, r.ThreadID, nilUUID(r.UserMessageID), r.ParentID, r.MessageID, r.Model, cfg, r.Owner, r.LeaseUntil, r.TreeSeq, r.CreatedAt)
	return queueEvents(b, r.ID, []thread.Record{first}, false, "")
}

// RunComplete writes a whole run that ended before its start was
// written; see thread.Store. threadline_run_start's checks, the user message,
// the ended run, the reply, the compacted log and the thread's new end,
// head and title go as one batch in one implicit transaction: one round
// trip and one commit.
func (s *Store) RunComplete(ctx context.Context, in thread.RunCreate, fin thread.RunFinish) error {
	b := &pgx.Batch{}
	if err := queueComplete(b, in, fin, s.clock()); err != nil {
		return err
	}
	return s.sendBatch(ctx, b, "write run")
}

// queueComplete queues RunComplete's statements.
func queueComplete(b *pgx.Batch, in thread.RunCreate, fin thread.RunFinish, now time.Time) error {
	data, err := compactRecords(fin)
	if err != nil {
		return err
	}
	r := fin.Run
	queueBegin(b, in)
	if in.User != nil {
		if err := queueCheckpoint(b, in.User); err != nil {
			return err
		}
	}
	cfg, err := marshalRunConfig(&r.Config)
	if err != nil {
		return fmt.Errorf("run %s config: %w", r.ID, err)
	}
	usage, rerr, err := finishJSON(fin)
	if err != nil {
		return err
	}
	b.Queue(sqlRunInsertEnded, r.ID, r.ThreadID, fin.Status, nilUUID(r.UserMessageID), r.ParentID, r.MessageID, fin.Model, cfg,
		usage, rerr, r.TreeSeq, r.CreatedAt, now)
	if err := queueCheckpoint(b, &fin.Assistant); err != nil {
		return err
	}
	b.Queue(sqlEventsInsert, r.ID, fin.Records[0].Seq, fin.Records[len(fin.Records)-1].Seq, data)
	b.Queue(sqlThreadEnd, in.Thread, fin.Assistant.Seq, r.MessageID, now, nilString(fin.Title))
	return nil
}

// errorNamesRun reports whether a run_in_progress error names the run.
func errorNamesRun(err error) bool {
	e, ok := errcode.As(err)
	return ok && e.RunID != uuid.Nil
}

// inProgress is the run_in_progress error naming the active run.
func inProgress(runID, messageID uuid.UUID) error {
	return &errcode.Error{Code: errcode.RunInProgress,
		Message: fmt.Sprintf("run %s is in progress on this thread; cancel it or rejoin it", runID),
		RunID:   runID, MessageID: messageID}
}

// RunGet returns the run; see thread.Store for its LastSequence.
func (s *Store) RunGet(ctx context.Context, threadID, runID uuid.UUID) (*thread.Run, error) {
	var last int64
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runCols+`, coalesce((SELECT max(last_seq) FROM run_events WHERE run_id = runs.id), 0)
		FROM runs WHERE id = $1 AND thread_id = $2`, runID, threadID), &last)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFoundRun(runID)
	}
	if err != nil {
		return nil, fmt.Errorf("get run: %w", interpretError(err))
	}
	r.LastSequence = last
	return r, nil
}

// RunByUserMessage returns the run that appended a user message.
func (s *Store) RunByUserMessage(ctx context.Context, threadID, messageID uuid.UUID) (*thread.Run, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runCols+` FROM runs WHERE thread_id = $1 AND user_message_id = $2`, threadID, messageID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errcode.New(errcode.NotFound, "no run appended message %s", messageID)
	}
	if err != nil {
		return nil, fmt.Errorf("run by message: %w", interpretError(err))
	}
	return r, nil
}

// RunActive returns the thread's running run, or not_found.
func (s *Store) RunActive(ctx context.Context, threadID uuid.UUID) (*thread.Run, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runCols+` FROM runs WHERE thread_id = $1 AND status = 'running'`, threadID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errcode.New(errcode.NotFound, "no run in progress on thread %s", threadID)
	}
	if err != nil {
		return nil, fmt.Errorf("active run: %w", interpretError(err))
	}
	return r, nil
}

// RunFinish ends a run; see thread.Store. Like RunCreate, one batch in one
// implicit transaction, guarded by threadline_run_finish.
func (s *Store) RunFinish(ctx context.Context, in thread.RunFinish) error {
	b := &pgx.Batch{}
	if err := queueFinish(b, in, s.clock()); err != nil {
		return err
	}
	err := s.sendBatch(ctx, b, "finish run")
	if err == nil {
		s.fence.forget(in.Run.ID)
	}
	return err
}

// RunFinishAll ends several runs in one batch and one implicit
// transaction; see thread.Store. Any refusal fails them all.
func (s *Store) RunFinishAll(ctx context.Context, ins []thread.RunFinish) error {
	b := &pgx.Batch{}
	now := s.clock()
	for _, in := range ins {
		if err := queueFinish(b, in, now); err != nil {
			return err
		}
	}
	err := s.sendBatch(ctx, b, "finish runs")
	if err == nil {
		for _, in := range ins {
			s.fence.forget(in.Run.ID)
		}
	}
	return err
}

// queueFinish queues RunFinish's statements: the run's end with its guard
// (threadline_run_finish, which also moves the thread's end and gives it
// the title when it has none), the assistant checkpoint and the compacted
// log replacing the live segments.
func queueFinish(b *pgx.Batch, in thread.RunFinish, now time.Time) error {
	data, err := compactRecords(in)
	if err != nil {
		return err
	}
	r := in.Run
	usage, rerr, err := finishJSON(in)
	if err != nil {
		return err
	}
	b.Queue(sqlRunFinish, r.ID, r.ThreadID, in.Assistant.Seq, now, r.Claim, in.Status, in.Model, usage, rerr, nilString(in.Title))
	if err := queueCheckpoint(b, &in.Assistant); err != nil {
		return err
	}
	b.Queue(sqlEventsDelete, r.ID)
	b.Queue(sqlEventsInsert, r.ID, in.Records[0].Seq, in.Records[len(in.Records)-1].Seq, data)
	return nil
}

// compactRecords checks a finished run's log and encodes it compacted.
func compactRecords(in thread.RunFinish) ([]byte, error) {
	if len(in.Records) == 0 {
		return nil, fmt.Errorf("finish run %s: no records", in.Run.ID)
	}
	for i, rec := range in.Records {
		if rec.Seq != int64(i+1) {
			return nil, fmt.Errorf("finish run %s: record %d has sequence %d", in.Run.ID, i, rec.Seq)
		}
	}
	data, err := encodeSegment(in.Records, true, in.Assistant.Text())
	if err != nil {
		// The tokens are not the reply's whole text: a continuation of an
		// agent turn, whose reply holds the turn's earlier text too. Its
		// log keeps its tokens' texts.
		data, err = encodeSegment(in.Records, false, "")
	}
	if err != nil {
		return nil, fmt.Errorf("finish run %s: %w", in.Run.ID, err)
	}
	return data, nil
}

// finishJSON is the usage and error columns of a finished run (nil when
// it has none).
func finishJSON(in thread.RunFinish) (usage, rerr []byte, err error) {
	if in.Usage != nil {
		usage = marshalUsage(in.Usage)
	}
	if in.Error != nil {
		rerr = marshalRunError(in.Error)
	}
	return usage, rerr, nil
}

// RunLeaseRenew extends the leases of runs still running under their
// claims; see thread.Store. A run whose row another transaction holds is
// skipped, not waited for: it is being ended or flagged, and the next
// renewal takes it. Waiting could deadlock with a write of several runs'
// ends (RunFinishAll), which locks its runs in another order. Such a run is
// not reported lost: lost are the runs that, in the statement's snapshot,
// are gone, ended or under another claim.
func (s *Store) RunLeaseRenew(ctx context.Context, claims []thread.RunClaim, until time.Time) (cancels, lost []uuid.UUID, err error) {
	ids, epochs := make([]uuid.UUID, len(claims)), make([]int64, len(claims))
	for i, c := range claims {
		ids[i], epochs[i] = c.RunID, c.Claim
	}
	rows, err := s.pool.Query(ctx, `WITH mine AS (SELECT * FROM unnest($1::uuid[], $2::bigint[]) AS m(id, claim)),
		renewed AS (
			UPDATE runs r SET lease_until = $3 FROM mine
			WHERE r.id = mine.id AND r.claim = mine.claim AND r.status = 'running'
				AND r.id IN (SELECT id FROM runs WHERE id = ANY($1) FOR UPDATE SKIP LOCKED)
			RETURNING r.id, r.cancel_requested)
		SELECT id, cancel_requested, false FROM renewed
		UNION ALL
		SELECT m.id, false, true FROM mine m
		WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = m.id AND r.claim = m.claim AND r.status = 'running')`,
		ids, epochs, until)
	if err != nil {
		return nil, nil, fmt.Errorf("renew leases: %w", interpretError(err))
	}
	var id uuid.UUID
	var cancel, gone bool
	_, err = pgx.ForEachRow(rows, []any{&id, &cancel, &gone}, func() error {
		switch {
		case gone:
			lost = append(lost, id)
		case cancel:
			cancels = append(cancels, id)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("renew leases: %w", interpretError(err))
	}
	return cancels, lost, nil
}

// RunRequestCancel flags a running run for its owner.
func (s *Store) RunRequestCancel(ctx context.Context, runID uuid.UUID) error {
	tag, err := s.pool.Exec(ctx, `UPDATE runs SET cancel_requested = true WHERE id = $1 AND status = 'running'`, runID)
	if err != nil {
		return fmt.Errorf("request cancel: %w", interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return errcode.New(errcode.Conflict, "run %s is not running", runID)
	}
	return nil
}

// RunClaimExpired takes over runs whose lease ended; see thread.Store.
// Each claim takes a new epoch, and, when it took any run, advisory lock
// (21580, 1) exclusively before it commits: every log append of an old
// claim (sqlLogLock, held by the group commit's append) has then
// either committed, and is in the log the claimer reads next, or will
// find its claim gone.
func (s *Store) RunClaimExpired(ctx context.Context, owner string, now, until time.Time, limit int) ([]*thread.Run, error) {
	var out []*thread.Run
	err := withTx(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE runs SET owner = $1, lease_until = $3, claim = claim + 1 WHERE id IN (
				SELECT id FROM runs WHERE status = 'running' AND lease_until < $2 ORDER BY lease_until LIMIT $4 FOR UPDATE SKIP LOCKED)
			RETURNING `+runCols, owner, now, until, limit)
		if err != nil {
			return err
		}
		if out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (*thread.Run, error) { return scanRun(r) }); err != nil || len(out) == 0 {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock(21580, 1)`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim expired runs: %w", interpretError(err))
	}
	return out, nil
}
