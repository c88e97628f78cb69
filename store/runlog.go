package store

// The run event log: appending a group commit's segments to run_log,
// reading a run's records back, and the log's garbage collection
// (RunLogPurge).

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// RunEventsAppend writes one segment per run, all in one run_log row and
// one commit: the group commit of every running run. The row is written
// only if every run is still running under its segment's claim (see
// sqlLogAppend: Postgres checks again only the runs whose claim may have
// changed since this process last checked it); else a
// *thread.ClaimLostError names the runs that are not.
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
	b := &pgx.Batch{}
	b.Queue(sqlLogLock)
	if mIDs, mSeqs := logMarks(segs); len(mIDs) > 0 {
		b.Queue(sqlLogAppendMarks, data, ids, claims, s.fence.counts(ids), mIDs, mSeqs)
	} else {
		b.Queue(sqlLogAppend, data, ids, claims, s.fence.counts(ids))
	}
	if s.peers.Load() {
		// The other processes' followers wake on commit.
		b.Queue(sqlLogNotify, runPayloads(segs))
	}
	var lost []uuid.UUID
	var gen int64
	if err := readLogBatch(s.logPool.SendBatch(ctx, b), b.Len(), &lost, &gen); err != nil {
		return fmt.Errorf("append run events: %w", interpretError(err))
	}
	if len(lost) > 0 {
		s.fence.forget(lost...)
		return &thread.ClaimLostError{Runs: lost}
	}
	s.fence.checked(ids, gen)
	return nil
}

// The group commit's append is a batch of two statements (three with
// wake-ups) in one implicit transaction and one round trip. sqlLogLock
// takes advisory lock (21580, 1) shared until the commit; a claim
// (RunClaimExpired) takes it exclusively before it commits, so every
// append either commits before the claim, and is in the log the claimer
// reads next, or is checked after it: sqlLogAppend is a statement of its
// own, whose snapshot is taken once the lock is held. It reads run_fence
// (migration 0013: the count of claims taken and running runs deleted),
// looks up only the runs whose count at their last check here ($4, -1:
// never) differs (the cheap test comes first, and the lookup is a
// subquery by primary key, so the planner neither hashes every running
// run nor looks up the others), appends $1 as one run_log row if no run
// is lost, and returns the lost runs (NULL: none) and the count.
var (
	sqlLogLock   = hot(`SELECT pg_advisory_xact_lock_shared(21580, 1)`)
	sqlLogAppend = hot(`WITH lost AS (
		SELECT array_agg(c.id) AS ids FROM unnest($2::uuid[], $3::bigint[], $4::bigint[]) AS c(id, claim, seen)
		WHERE c.seen IS DISTINCT FROM (SELECT gen FROM run_fence)
		  AND (SELECT CASE WHEN r.status = 'running' THEN r.claim END FROM runs r WHERE r.id = c.id) IS DISTINCT FROM c.claim),
	ins AS (INSERT INTO run_log (data) SELECT $1::bytea FROM lost WHERE lost.ids IS NULL)
	SELECT lost.ids, (SELECT gen FROM run_fence) FROM lost`)
)

// sqlLogAppendMarks is sqlLogAppend that also writes run_marks ($5, $6:
// run ids and sequences) when the row is written.
var sqlLogAppendMarks = hot(strings.Replace(sqlLogAppend, "SELECT lost.ids,",
	`, marks AS (INSERT INTO run_marks (run_id, seq) SELECT m.id, m.seq FROM lost, unnest($5::uuid[], $6::bigint[]) AS m(id, seq)
		WHERE lost.ids IS NULL ON CONFLICT DO NOTHING)
	SELECT lost.ids,`, 1))

// logMarks returns the runs and last sequences of the segments that hold
// a record marking a step's or a tool call's edge (migration 0019): a
// tool call, a tool result or an error.
func logMarks(segs []thread.Segment) (ids []uuid.UUID, seqs []int64) {
	for _, sg := range segs {
		for i := range sg.Records {
			if k := sg.Records[i].Kind; k == thread.KindToolCall || k == thread.KindToolResult || k == thread.KindError {
				ids, seqs = append(ids, sg.RunID), append(seqs, sg.Records[len(sg.Records)-1].Seq)
				break
			}
		}
	}
	return ids, seqs
}

// readLogBatch reads the answers of a log append's batch of n statements
// (the lock, the append, any wake-ups) and closes it.
func readLogBatch(br pgx.BatchResults, n int, lost *[]uuid.UUID, gen *int64) error {
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return err
	}
	if err := br.QueryRow().Scan(lost, gen); err != nil {
		_ = br.Close()
		return err
	}
	for range n - 2 {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return err
		}
	}
	return br.Close()
}

// RunEventsAfter returns the logged records after a sequence, restoring the
// token texts of a compacted log from the assistant checkpoint. A running
// run's log is its rows in run_events and its segments in the run_log rows
// after its log_from; one statement reads both from one snapshot, and
// RunLogPurge moves and deletes in one transaction, so the statement sees
// the whole log either before or after a purge.
func (s *Store) RunEventsAfter(ctx context.Context, runID uuid.UUID, after int64) ([]thread.Record, error) {
	segs, err := s.runSegments(ctx, runID, after)
	if err != nil {
		return nil, err
	}
	var out []thread.Record
	var reply *string
	for _, sg := range segs {
		text, err := s.segmentText(ctx, runID, sg, &reply)
		if err != nil {
			return nil, err
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
	return sortRecords(out), nil
}

// sortRecords orders records by sequence, without repeats. Each source is
// in order; a log written before migration 0006 can have segments in both.
func sortRecords(out []thread.Record) []thread.Record {
	slices.SortStableFunc(out, func(a, b thread.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	return slices.CompactFunc(out, func(a, b thread.Record) bool { return a.Seq == b.Seq })
}

// RunEventsPage returns the logged records after a sequence, in order, as
// RunEventsAfter does, but only as many as fit in maxBytes (at least one;
// see thread.RecordSize), and whether more follow. Only the page is
// decoded and kept: its texts are copied out of the rows and the reply.
func (s *Store) RunEventsPage(ctx context.Context, runID uuid.UUID, after int64, maxBytes int) ([]thread.Record, bool, error) {
	segs, err := s.runSegments(ctx, runID, after)
	if err != nil {
		return nil, false, err
	}
	var (
		out      []thread.Record
		used     int
		more     bool
		unsorted bool
		reply    *string
	)
	for _, sg := range segs {
		if more || unsorted {
			break
		}
		text, err := s.segmentText(ctx, runID, sg, &reply)
		if err != nil {
			return nil, false, err
		}
		err = walkSegment(sg.first, sg.last, sg.data, text, after+1, func(r *thread.Record) bool {
			if n := len(out); n > 0 && r.Seq <= out[n-1].Seq {
				unsorted = true // sources out of order: read it all below
				return false
			}
			size := thread.RecordSize(r)
			if len(out) > 0 && used+size > maxBytes {
				more = true
				return false
			}
			used += size
			out = append(out, *r)
			return true
		})
		if err != nil {
			return nil, false, fmt.Errorf("run %s log: %w", runID, err)
		}
	}
	if unsorted {
		all, err := s.RunEventsAfter(ctx, runID, after)
		if err != nil {
			return nil, false, err
		}
		return cutPage(all, maxBytes)
	}
	return ownTexts(out), more, nil
}

// cutPage keeps the first records of recs that fit in maxBytes (at least
// one) and reports whether it left some out.
func cutPage(recs []thread.Record, maxBytes int) ([]thread.Record, bool, error) {
	used := 0
	for i := range recs {
		used += thread.RecordSize(&recs[i])
		if i > 0 && used > maxBytes {
			return ownTexts(recs[:i:i]), true, nil
		}
	}
	return ownTexts(recs), false, nil
}

// ownTexts copies the records' texts into one string of their own, so a
// page does not keep the whole reply (a compact log's texts are
// substrings of it) in memory.
func ownTexts(recs []thread.Record) []thread.Record {
	n := 0
	for i := range recs {
		n += len(recs[i].Text)
	}
	var b strings.Builder
	b.Grow(n)
	for i := range recs {
		b.WriteString(recs[i].Text)
	}
	all, off := b.String(), 0
	for i := range recs {
		k := len(recs[i].Text)
		recs[i].Text = all[off : off+k]
		off += k
	}
	return recs
}

// logSeg is one stored segment of a run's log.
type logSeg struct {
	first, last int64
	data        []byte
}

// runSegments reads the segments of the run's log that may hold records
// after a sequence: its run_events rows, and its segments in the shared
// run_log rows while it runs (see RunEventsAfter), from where the run's
// log hint says they start.
func (s *Store) runSegments(ctx context.Context, runID uuid.UUID, after int64) ([]logSeg, error) {
	from := s.hints.from(runID, after)
	rows, err := s.pool.Query(ctx, sqlEventsAfter, runID, after, from)
	if err != nil {
		return nil, fmt.Errorf("read run events: %w", interpretError(err))
	}
	var segs []logSeg
	var (
		inLog     bool
		key, last int64
		data      []byte
		seen      = logHint{id: from}
	)
	_, err = pgx.ForEachRow(rows, []any{&inLog, &key, &last, &data}, func() error {
		if !inLog {
			segs = append(segs, logSeg{key, last, data})
			return nil
		}
		seen.id = max(seen.id, key)
		return logSegments(data, runID, func(_ uuid.UUID, first, last int64, b []byte) error {
			seen.seq = max(seen.seq, last)
			segs = append(segs, logSeg{first, last, b})
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read run events: %w", interpretError(err))
	}
	s.hints.note(runID, seen)
	return segs, nil
}

// segmentText returns the text a segment's records take their token texts
// from: none for a live segment; for a compact one the reply's, read once
// into *reply.
func (s *Store) segmentText(ctx context.Context, runID uuid.UUID, sg logSeg, reply **string) (string, error) {
	if len(sg.data) == 0 || sg.data[0] != segCompact {
		return "", nil
	}
	if *reply != nil {
		return **reply, nil
	}
	var content []byte
	// The run's reply: its message, or the checkpoint a continuation of
	// an agent turn appends under the run's own id.
	err := s.pool.QueryRow(ctx, `SELECT c.content FROM runs r JOIN checkpoints c ON c.thread_id = r.thread_id
		AND c.id IN (r.message_id, r.id) AND c.run_id = r.id WHERE r.id = $1`, runID).Scan(&content)
	if err != nil {
		return "", fmt.Errorf("read run reply: %w", interpretError(err))
	}
	parts, err := unmarshalParts(content)
	if err != nil {
		return "", fmt.Errorf("read run reply: %w", err)
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == checkpoint.PartText {
			b.WriteString(p.Text)
		}
	}
	t := b.String()
	*reply = &t
	return t, nil
}

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

// sqlEventsAfter reads a run's log after sequence $2: its rows in
// run_events, and while it runs the run_log rows after its log_from that
// hold a segment of it, from run_log id $3 on (logHints).
const sqlEventsAfter = `SELECT false, first_seq, last_seq, data FROM run_events WHERE run_id = $1 AND last_seq > $2
	UNION ALL
	SELECT true, l.id, 0, l.data FROM runs r JOIN run_log l ON l.id > greatest(r.log_from, $3)
	WHERE r.id = $1 AND r.status = 'running' AND position(uuid_send($1) IN l.data) > 0
	ORDER BY 1, 2`

// logHint says where a read of a running run's shared log got to: the
// run_log rows up to id hold none of its records after seq. A run's
// segments are written by one owner whose group commits follow one
// another, each with a later id, so a later read after seq or more need
// not scan those rows again; a follower that reads after every commit
// (thread's relay) then scans one row per read instead of every row since
// the run started.
type logHint struct{ seq, id int64 }

// logHints holds the last hint of each running run this process read.
type logHints struct {
	mu sync.Mutex
	m  map[uuid.UUID]logHint
}

// maxLogHints bounds logHints: when full it starts again empty (a read
// without a hint is only slower).
const maxLogHints = 4096

// from returns the run_log id a read of the run after sequence after may
// start past (0: every row after the run's log_from).
func (h *logHints) from(runID uuid.UUID, after int64) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if hint, ok := h.m[runID]; ok && after >= hint.seq {
		return hint.id
	}
	return 0
}

// note keeps what a read saw of the shared log. A read from a hint that
// found no new row keeps the hint; a whole read that found none forgets
// the run (it ended, or its segments were all moved to run_events).
func (h *logHints) note(runID uuid.UUID, seen logHint) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if seen.seq == 0 {
		if seen.id == 0 {
			delete(h.m, runID)
		}
		return
	}
	if h.m == nil || len(h.m) >= maxLogHints {
		h.m = make(map[uuid.UUID]logHint)
	}
	if old, ok := h.m[runID]; !ok || seen.id > old.id {
		h.m[runID] = seen
	}
}
