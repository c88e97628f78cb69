package store

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/errcode"
)

// The statements of a turn, prepared on every new connection (see hot).
var (
	sqlRunOpen     = hot(`SELECT threadline_run_open($1, $2, $3, $4, $5)`)
	sqlRunEnd      = hot(`SELECT threadline_run_end($1, $2, $3, $4, $5)`)
	sqlThreadStart = hot(`UPDATE threads SET last_seq = $2, head_id = $3, updated_at = $4 WHERE id = $1`)
	sqlThreadTitle = hot(`UPDATE threads SET title = $2 WHERE id = $1 AND title IS NULL`)
	sqlThreadEnd   = hot(`UPDATE threads SET last_seq = $2, head_id = $3, updated_at = $4, title = coalesce(title, $5) WHERE id = $1`)
	sqlRunInsert   = hot(`INSERT INTO runs (id, thread_id, status, user_message_id, parent_id, message_id, model, config, owner, lease_until, tree_seq, created_at, log_from)
		VALUES ($1, $2, 'running', $3, $4, $5, $6, $7, $8, $9, $10, $11, (SELECT coalesce(max(id), 0) FROM run_log))`)
	sqlRunInsertEnded = hot(`INSERT INTO runs (id, thread_id, status, user_message_id, parent_id, message_id, model, config, usage, error, tree_seq, created_at, finished_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`)
	sqlRunFinish = hot(`UPDATE runs SET status = $2, model = $3, usage = $4, error = $5, finished_at = $6,
		owner = NULL, lease_until = NULL WHERE id = $1`)
	sqlEventsInsert = hot(`INSERT INTO run_events (run_id, first_seq, last_seq, data) VALUES ($1, $2, $3, $4)`)
	sqlLogAppend    = hot(`SELECT threadline_log_append($1, $2, $3)`)
	sqlEventsDelete = hot(`DELETE FROM run_events WHERE run_id = $1`)
)

const runCols = `id, thread_id, status, coalesce(user_message_id, '00000000-0000-0000-0000-000000000000'), parent_id, message_id,
	model, config, usage, error, coalesce(owner, ''), coalesce(lease_until, 'epoch'), tree_seq, created_at, finished_at, claim`

func scanRun(row pgx.Row) (*thread.Run, error) {
	var r thread.Run
	var cfg, usage, rerr []byte
	if err := row.Scan(&r.ID, &r.ThreadID, &r.Status, &r.UserMessageID, &r.ParentID, &r.MessageID, &r.Model,
		&cfg, &usage, &rerr, &r.Owner, &r.LeaseUntil, &r.TreeSeq, &r.CreatedAt, &r.FinishedAt, &r.Claim); err != nil {
		return nil, err
	}
	r.CreatedAt = r.CreatedAt.UTC()
	if cfg != nil {
		_ = json.Unmarshal(cfg, &r.Config)
	}
	if usage != nil {
		r.Usage = new(thread.Usage)
		_ = json.Unmarshal(usage, r.Usage)
	}
	if rerr != nil {
		r.Error = new(thread.RunError)
		_ = json.Unmarshal(rerr, r.Error)
	}
	return &r, nil
}

func notFoundRun(id uuid.UUID) error {
	return errcode.New(errcode.NotFound, "run %s not found", id)
}

// RunCreate starts a run and commits it; see thread.Store. The checks of
// threadline_run_open and the start's writes go as one batch in one
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

// queueOpen queues threadline_run_open for a run, after the thread's
// creation when the run creates it. An id that exists by then is left as
// it is, and threadline_run_open checks it (another caller's: not_found).
func queueOpen(b *pgx.Batch, in thread.RunCreate) {
	if t := in.Create; t != nil {
		md := t.Metadata
		if len(md) == 0 {
			md = json.RawMessage(`{}`)
		}
		b.Queue(sqlThreadInsert, t.ID, t.Caller, t.Title, md, t.CreatedAt)
	}
	want, parent := in.Run.TreeSeq, in.Run.ParentID
	var message *uuid.UUID
	if in.User != nil {
		want--
		message, parent = &in.User.ID, in.User.ParentID
	}
	b.Queue(sqlRunOpen, in.Thread, in.Caller, want, message, nilUUID(parent))
}

// queueStart queues a run's start: the user message, the running run, the
// thread's new end and head, and the first log record.
func queueStart(b *pgx.Batch, in thread.RunCreate, first thread.Record) error {
	r := in.Run
	if in.User != nil {
		queueCheckpoint(b, in.User)
	}
	cfg, _ := json.Marshal(r.Config)
	b.Queue(sqlRunInsert,
		r.ID, r.ThreadID, nilUUID(r.UserMessageID), r.ParentID, r.MessageID, r.Model, cfg, r.Owner, r.LeaseUntil, r.TreeSeq, r.CreatedAt)
	b.Queue(sqlThreadStart, in.Thread, r.TreeSeq, r.MessageID, r.CreatedAt)
	return queueEvents(b, r.ID, []thread.Record{first}, false, "")
}

// RunComplete writes a whole run that ended before its start was
// written; see thread.Store. threadline_run_open's checks, the user message,
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
	queueOpen(b, in)
	if in.User != nil {
		queueCheckpoint(b, in.User)
	}
	cfg, _ := json.Marshal(r.Config)
	usage, rerr := finishJSON(fin)
	b.Queue(sqlRunInsertEnded, r.ID, r.ThreadID, fin.Status, nilUUID(r.UserMessageID), r.ParentID, r.MessageID, fin.Model, cfg,
		usage, rerr, r.TreeSeq, r.CreatedAt, now)
	queueCheckpoint(b, &fin.Assistant)
	b.Queue(sqlEventsInsert, r.ID, fin.Records[0].Seq, fin.Records[len(fin.Records)-1].Seq, data)
	var title *string
	if fin.Title != "" {
		title = &fin.Title
	}
	b.Queue(sqlThreadEnd, in.Thread, fin.Assistant.Seq, r.MessageID, now, title)
	return nil
}

// sendBatch runs a batch as one implicit transaction and returns its first
// error, interpreted.
func (s *Store) sendBatch(ctx context.Context, b *pgx.Batch, what string) error {
	return execBatch(s.pool.SendBatch(ctx, b), b.Len(), what)
}

func execBatch(br pgx.BatchResults, n int, what string) error {
	for range n {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return fmt.Errorf("%s: %w", what, interpretError(err))
		}
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("%s: %w", what, interpretError(err))
	}
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

func nilUUID(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}

// RunGet returns the run; see thread.Store for its LastSequence.
func (s *Store) RunGet(ctx context.Context, threadID, runID uuid.UUID) (*thread.Run, error) {
	row := s.pool.QueryRow(ctx, `SELECT `+runCols+`, coalesce((SELECT max(last_seq) FROM run_events WHERE run_id = runs.id), 0)
		FROM runs WHERE id = $1 AND thread_id = $2`, runID, threadID)
	var r thread.Run
	var cfg, usage, rerr []byte
	err := row.Scan(&r.ID, &r.ThreadID, &r.Status, &r.UserMessageID, &r.ParentID, &r.MessageID, &r.Model,
		&cfg, &usage, &rerr, &r.Owner, &r.LeaseUntil, &r.TreeSeq, &r.CreatedAt, &r.FinishedAt, &r.Claim, &r.LastSequence)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFoundRun(runID)
	}
	if err != nil {
		return nil, fmt.Errorf("get run: %w", interpretError(err))
	}
	r.CreatedAt = r.CreatedAt.UTC()
	if cfg != nil {
		_ = json.Unmarshal(cfg, &r.Config)
	}
	if usage != nil {
		r.Usage = new(thread.Usage)
		_ = json.Unmarshal(usage, r.Usage)
	}
	if rerr != nil {
		r.Error = new(thread.RunError)
		_ = json.Unmarshal(rerr, r.Error)
	}
	return &r, nil
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

// RunEventsAppend writes one segment per run, all in one run_log row and
// one commit: the group commit of every running run. The row is written
// only if every run is still running under its segment's claim
// (threadline_log_append, migration 0009); else a *thread.ClaimLostError
// names the runs that are not.
func (s *Store) RunEventsAppend(ctx context.Context, segs []thread.Segment) error {
	data, err := encodeLog(segs)
	if err != nil || data == nil {
		return err
	}
	ids, claims := make([]uuid.UUID, 0, len(segs)), make([]int64, 0, len(segs))
	for _, sg := range segs {
		if len(sg.Records) > 0 {
			ids, claims = append(ids, sg.RunID), append(claims, sg.Claim)
		}
	}
	var lost []uuid.UUID
	if err := s.logPool.QueryRow(ctx, sqlLogAppend, data, ids, claims).Scan(&lost); err != nil {
		return fmt.Errorf("append run events: %w", interpretError(err))
	}
	if len(lost) > 0 {
		return &thread.ClaimLostError{Runs: lost}
	}
	return nil
}

// encodeLog is a run_log row for segs (see migration 0006), or nil when
// they hold no record.
func encodeLog(segs []thread.Segment) ([]byte, error) {
	size := 0
	for _, sg := range segs {
		size += 16 + 3*binary.MaxVarintLen32 + 1
		for _, r := range sg.Records {
			size += len(r.Text) + 4
		}
	}
	var b []byte
	for _, sg := range segs {
		if len(sg.Records) == 0 {
			continue
		}
		if b == nil {
			b = make([]byte, 0, size)
		}
		b = append(b, sg.RunID[:]...)
		b = binary.AppendUvarint(b, uint64(sg.Records[0].Seq))
		b = binary.AppendUvarint(b, uint64(sg.Records[len(sg.Records)-1].Seq))
		// The segment's length goes before it: reserve the most a length
		// can take, encode, then move the segment up to its real length.
		at := len(b)
		b = append(b, make([]byte, binary.MaxVarintLen32)...)
		seg, err := appendSegment(b, sg.Records, false, "")
		if err != nil {
			return nil, fmt.Errorf("append run events: %w", err)
		}
		n := len(seg) - at - binary.MaxVarintLen32
		k := len(binary.AppendUvarint(seg[at:at], uint64(n)))
		copy(seg[at+k:], seg[at+binary.MaxVarintLen32:])
		b = seg[:at+k+n]
	}
	return b, nil
}

// RunLogPurge frees run_log rows; see thread.Store. In one transaction it
// first takes every running run that still needs rows older than
// spillAfter, moves its segments in the rows older than spillAfter/5 into
// one run_events row of its own and advances its log_from past them (so a
// run is moved about once per spillAfter, and shared rows live about
// spillAfter); then it deletes the rows up to the smallest log_from of a
// running run (all of them when none runs). A run not yet visible as
// running here takes a log_from at least as large as any row visible here,
// so its rows are never among them. A run whose row is locked (its end is
// being written) is left for the next purge: its end then deletes what was
// moved, or finds it. It reports whether rows remain.
func (s *Store) RunLogPurge(ctx context.Context) (more bool, err error) {
	err = withTx(ctx, s.pool, func(tx pgx.Tx) error {
		if err := spillLog(ctx, tx, s.spillAfter); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `WITH t AS (SELECT coalesce((SELECT min(log_from) FROM runs WHERE status = 'running'),
				(SELECT max(id) FROM run_log), 0) AS upto),
			gone AS (DELETE FROM run_log WHERE id <= (SELECT upto FROM t))
			SELECT EXISTS (SELECT 1 FROM run_log, t WHERE run_log.id > t.upto)`).Scan(&more)
	})
	if err != nil {
		return false, fmt.Errorf("purge run log: %w", interpretError(err))
	}
	return more, nil
}

// spillLog moves running runs' segments out of the run_log rows older than
// age (see RunLogPurge).
func spillLog(ctx context.Context, tx pgx.Tx, age time.Duration) error {
	var old, cut int64
	err := tx.QueryRow(ctx, `SELECT coalesce(max(id) FILTER (WHERE created_at <= now() - make_interval(secs => $1)), 0),
		coalesce(max(id) FILTER (WHERE created_at <= now() - make_interval(secs => $1 / 5)), 0) FROM run_log`,
		age.Seconds()).Scan(&old, &cut)
	if err != nil || old == 0 {
		return err
	}
	// Locked in id order, skipping a run whose end holds its row: nothing
	// waits, so nothing deadlocks.
	rows, err := tx.Query(ctx, `SELECT id, log_from FROM runs WHERE status = 'running' AND log_from < $1
		ORDER BY id FOR UPDATE SKIP LOCKED`, old)
	if err != nil {
		return err
	}
	type spill struct {
		from, first, last int64
		data              []byte
	}
	runs := map[uuid.UUID]*spill{}
	var ids []uuid.UUID
	lowest := cut
	var id uuid.UUID
	var from int64
	_, err = pgx.ForEachRow(rows, []any{&id, &from}, func() error {
		runs[id] = &spill{from: from}
		ids = append(ids, id)
		lowest = min(lowest, from)
		return nil
	})
	if err != nil || len(ids) == 0 {
		return err
	}
	rows, err = tx.Query(ctx, `SELECT id, data FROM run_log WHERE id > $1 AND id <= $2 ORDER BY id`, lowest, cut)
	if err != nil {
		return err
	}
	var row int64
	var data []byte
	_, err = pgx.ForEachRow(rows, []any{&row, &data}, func() error {
		return logSegments(data, uuid.Nil, func(id uuid.UUID, first, last int64, seg []byte) error {
			sp := runs[id]
			if sp == nil || row <= sp.from || len(seg) == 0 || seg[0] != segLive {
				return nil
			}
			if sp.data == nil {
				sp.first, sp.data = first, []byte{segLive}
			} else if first != sp.last+1 {
				return fmt.Errorf("run %s: segment %d..%d after %d: %w", id, first, last, sp.last, errCorrupt)
			}
			// Live segments concatenate: one kind byte, then records.
			sp.last, sp.data = last, append(sp.data, seg[1:]...)
			return nil
		})
	})
	if err != nil {
		return err
	}
	var runIDs []uuid.UUID
	var firsts, lasts []int64
	var datas [][]byte
	for _, id := range ids {
		if sp := runs[id]; sp.data != nil {
			runIDs, firsts, lasts, datas = append(runIDs, id), append(firsts, sp.first), append(lasts, sp.last), append(datas, sp.data)
		}
	}
	if len(runIDs) > 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO run_events (run_id, first_seq, last_seq, data)
			SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::bytea[])`, runIDs, firsts, lasts, datas); err != nil {
			return err
		}
	}
	_, err = tx.Exec(ctx, `UPDATE runs SET log_from = $2 WHERE id = ANY($1)`, ids, cut)
	return err
}

// logSegments calls fn with each segment of a run_log row that belongs to
// run (every segment when run is uuid.Nil).
func logSegments(data []byte, run uuid.UUID, fn func(id uuid.UUID, first, last int64, seg []byte) error) error {
	for len(data) > 0 {
		if len(data) < 16 {
			return errCorrupt
		}
		id := uuid.UUID(data[:16])
		data = data[16:]
		var v [3]uint64
		for i := range v {
			x, k := binary.Uvarint(data)
			if k <= 0 {
				return errCorrupt
			}
			v[i], data = x, data[k:]
		}
		if v[2] > uint64(len(data)) || v[0] > v[1] {
			return errCorrupt
		}
		seg := data[:v[2]]
		data = data[v[2]:]
		if run == uuid.Nil || id == run {
			if err := fn(id, int64(v[0]), int64(v[1]), seg); err != nil {
				return err
			}
		}
	}
	return nil
}

// RunEventsAfter returns the logged records after a sequence, restoring the
// token texts of a compacted log from the assistant checkpoint. A running
// run's log is its rows in run_events and its segments in the run_log rows
// after its log_from; one statement reads both from one snapshot, and
// RunLogPurge moves and deletes in one transaction, so the statement sees
// the whole log either before or after a purge.
func (s *Store) RunEventsAfter(ctx context.Context, runID uuid.UUID, after int64) ([]thread.Record, error) {
	rows, err := s.pool.Query(ctx, `SELECT false, first_seq, last_seq, data FROM run_events WHERE run_id = $1 AND last_seq > $2
		UNION ALL
		SELECT true, l.id, 0, l.data FROM runs r JOIN run_log l ON l.id > r.log_from
		WHERE r.id = $1 AND r.status = 'running' AND position(uuid_send($1) IN l.data) > 0
		ORDER BY 1, 2`, runID, after)
	if err != nil {
		return nil, fmt.Errorf("read run events: %w", interpretError(err))
	}
	type seg struct {
		first, last int64
		data        []byte
	}
	var segs []seg
	var (
		inLog     bool
		key, last int64
		data      []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&inLog, &key, &last, &data}, func() error {
		if !inLog {
			segs = append(segs, seg{key, last, data})
			return nil
		}
		return logSegments(data, runID, func(_ uuid.UUID, first, last int64, b []byte) error {
			segs = append(segs, seg{first, last, b})
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read run events: %w", interpretError(err))
	}
	var out []thread.Record
	for _, sg := range segs {
		var text string
		if len(sg.data) > 0 && sg.data[0] == segCompact {
			var content []byte
			err := s.pool.QueryRow(ctx, `SELECT c.content FROM runs r JOIN checkpoints c ON c.thread_id = r.thread_id AND c.id = r.message_id
				WHERE r.id = $1`, runID).Scan(&content)
			if err != nil {
				return nil, fmt.Errorf("read run reply: %w", interpretError(err))
			}
			var parts []checkpoint.Part
			if err := json.Unmarshal(content, &parts); err != nil {
				return nil, fmt.Errorf("read run reply: %w", err)
			}
			for _, p := range parts {
				text += p.Text
			}
		}
		recs, err := decodeSegment(sg.first, sg.last, sg.data, text)
		if err != nil {
			return nil, fmt.Errorf("run %s log: %w", runID, err)
		}
		for _, r := range recs {
			if r.Seq > after {
				out = append(out, r)
			}
		}
	}
	// Each source is in order; a log written before migration 0006 can
	// have segments in both.
	slices.SortStableFunc(out, func(a, b thread.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	return slices.CompactFunc(out, func(a, b thread.Record) bool { return a.Seq == b.Seq }), nil
}

// RunFinish ends a run; see thread.Store. Like RunCreate, one batch in one
// implicit transaction, guarded by threadline_run_end.
func (s *Store) RunFinish(ctx context.Context, in thread.RunFinish) error {
	b := &pgx.Batch{}
	if err := queueFinish(b, in, s.clock()); err != nil {
		return err
	}
	return s.sendBatch(ctx, b, "finish run")
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
	return s.sendBatch(ctx, b, "finish runs")
}

// queueFinish queues RunFinish's statements: the guard, the assistant
// checkpoint, the compacted log replacing the live segments, the run's end
// and the thread's title when it has none.
func queueFinish(b *pgx.Batch, in thread.RunFinish, now time.Time) error {
	data, err := compactRecords(in)
	if err != nil {
		return err
	}
	r := in.Run
	usage, rerr := finishJSON(in)
	b.Queue(sqlRunEnd, r.ID, r.ThreadID, in.Assistant.Seq, now, r.Claim)
	queueCheckpoint(b, &in.Assistant)
	b.Queue(sqlEventsDelete, r.ID)
	b.Queue(sqlEventsInsert, r.ID, in.Records[0].Seq, in.Records[len(in.Records)-1].Seq, data)
	b.Queue(sqlRunFinish, r.ID, in.Status, in.Model, usage, rerr, now)
	if in.Title != "" {
		b.Queue(sqlThreadTitle, r.ThreadID, in.Title)
	}
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
		return nil, fmt.Errorf("finish run %s: %w", in.Run.ID, err)
	}
	return data, nil
}

func finishJSON(in thread.RunFinish) (usage, rerr []byte) {
	if in.Usage != nil {
		usage, _ = json.Marshal(in.Usage)
	}
	if in.Error != nil {
		rerr, _ = json.Marshal(in.Error)
	}
	return usage, rerr
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
// claim (threadline_log_append, which holds that lock shared) has then
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

// Segment encoding. A live segment holds token texts; a compact segment (the
// whole log of a finished run) holds only token lengths, because the texts
// are the assistant checkpoint's, and runs of tokens of one length as a
// count and that length (a tokenizer's tokens often repeat a length; the
// built-in model's always do). Layout: one format byte, then per record (or
// run of records) a kind byte and its fields as uvarint-length-prefixed
// strings / varints. recLength is read but no longer written.
const (
	segLive    = 'L'
	segCompact = 'C'

	recToken  = 't'
	recLength = 'n'
	recRun    = 'r' // uvarint count, uvarint length
	recSnap   = 's'
	recError  = 'e'
)

// queueEvents queues the insert of one log segment.
func queueEvents(b *pgx.Batch, runID uuid.UUID, recs []thread.Record, compact bool, text string) error {
	data, err := encodeSegment(recs, compact, text)
	if err != nil {
		return fmt.Errorf("append run events: %w", err)
	}
	b.Queue(sqlEventsInsert,
		runID, recs[0].Seq, recs[len(recs)-1].Seq, data)
	return nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func encodeSegment(recs []thread.Record, compact bool, text string) ([]byte, error) {
	size := 1
	for _, r := range recs {
		size += len(r.Text) + 4
	}
	if compact {
		size = 1 + 2*len(recs) + 64
	}
	return appendSegment(make([]byte, 0, size), recs, compact, text)
}

// appendSegment appends recs encoded as one segment to b.
func appendSegment(b []byte, recs []thread.Record, compact bool, text string) ([]byte, error) {
	if compact {
		b = append(b, segCompact)
	} else {
		b = append(b, segLive)
	}
	off := 0
	for i := 0; i < len(recs); i++ {
		r := recs[i]
		switch r.Kind {
		case thread.KindToken:
			if compact {
				n := 0 // tokens in this run of one length
				for ; i+n < len(recs) && recs[i+n].Kind == thread.KindToken && len(recs[i+n].Text) == len(r.Text); n++ {
					t := recs[i+n].Text
					if off+len(t) > len(text) || text[off:off+len(t)] != t {
						return nil, fmt.Errorf("token %d is not in the reply text", recs[i+n].Seq)
					}
					off += len(t)
				}
				i += n - 1
				b = append(b, recRun)
				b = binary.AppendUvarint(b, uint64(n))
				b = binary.AppendUvarint(b, uint64(len(r.Text)))
			} else {
				b = append(b, recToken)
				b = appendString(b, r.Text)
			}
		case thread.KindSnapshot:
			b = append(b, recSnap)
			b = appendString(b, string(r.Status))
			b = binary.AppendVarint(b, r.TreeSeq)
		case thread.KindError:
			b = append(b, recError)
			b = appendString(b, string(r.Code))
			b = appendString(b, r.Text)
		default:
			return nil, fmt.Errorf("record %d has unknown kind %q", r.Seq, r.Kind)
		}
	}
	if compact && off != len(text) {
		return nil, fmt.Errorf("tokens cover %d of %d reply bytes", off, len(text))
	}
	return b, nil
}

var errCorrupt = errors.New("corrupt run log segment")

// decodeSegment decodes the records first..last of a segment.
func decodeSegment(first, last int64, b []byte, text string) ([]thread.Record, error) {
	if len(b) == 0 {
		return nil, errCorrupt
	}
	compact := b[0] == segCompact
	b = b[1:]
	out := make([]thread.Record, 0, min(max(last-first+1, 0), 1<<16))
	readString := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return "", false
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, true
	}
	off := 0
	for seq := first; len(b) > 0; seq++ {
		kind := b[0]
		b = b[1:]
		r := thread.Record{Seq: seq}
		ok := true
		switch kind {
		case recToken:
			r.Kind = thread.KindToken
			r.Text, ok = readString()
		case recLength:
			n, k := binary.Uvarint(b)
			if k <= 0 || off+int(n) > len(text) {
				return nil, errCorrupt
			}
			b = b[k:]
			r.Kind, r.Text = thread.KindToken, text[off:off+int(n)]
			off += int(n)
		case recRun:
			count, k := binary.Uvarint(b)
			if k <= 0 || count == 0 {
				return nil, errCorrupt
			}
			b = b[k:]
			n, k := binary.Uvarint(b)
			if k <= 0 || n > uint64(len(text)) || count > uint64(last-seq+1) || off+int(count)*int(n) > len(text) {
				return nil, errCorrupt
			}
			b = b[k:]
			for j := range int(count) - 1 {
				out = append(out, thread.Record{Seq: seq + int64(j), Kind: thread.KindToken, Text: text[off : off+int(n)]})
				off += int(n)
			}
			seq += int64(count) - 1
			r.Seq, r.Kind, r.Text = seq, thread.KindToken, text[off:off+int(n)]
			off += int(n)
		case recSnap:
			var st string
			st, ok = readString()
			r.Kind, r.Status = thread.KindSnapshot, thread.RunStatus(st)
			v, k := binary.Varint(b)
			if k <= 0 {
				return nil, errCorrupt
			}
			b = b[k:]
			r.TreeSeq = v
		case recError:
			r.Kind = thread.KindError
			var code string
			if code, ok = readString(); ok {
				r.Code = errcode.Code(code)
				r.Text, ok = readString()
			}
		default:
			return nil, errCorrupt
		}
		if !ok {
			return nil, errCorrupt
		}
		out = append(out, r)
	}
	if int64(len(out)) != last-first+1 || compact && off != len(text) {
		return nil, errCorrupt
	}
	return out, nil
}
