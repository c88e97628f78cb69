package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

var _ thread.RawStore = (*Store)(nil)

// DefaultRawMaxBytes is the cap on one run's raw records (the bytes of
// their data) unless SetRawMaxBytes says otherwise.
const DefaultRawMaxBytes = 8 << 20

// SetRawMaxBytes sets the cap on one run's raw records, in bytes of data
// (DefaultRawMaxBytes when n <= 0). Call it before the store is used.
func (s *Store) SetRawMaxBytes(n int64) {
	if n <= 0 {
		n = DefaultRawMaxBytes
	}
	s.rawMax = n
}

func (s *Store) rawMaxBytes() int64 {
	if s.rawMax <= 0 {
		return DefaultRawMaxBytes
	}
	return s.rawMax
}

// rawLockSpace keys the advisory lock that orders one run's appends.
const rawLockSpace = 21581

// RunRawAppend appends recs to the run's raw log, in order, up to the cap
// (SetRawMaxBytes): the first record that does not fit is replaced by a
// thread.RawTruncated record naming the cap and its sequence, and records
// after that, in this append or later ones, are dropped. It returns
// not_found when the run does not exist (nothing is appended), and
// invalid_request for a record without a source or kind or whose data is
// not one JSON value (nothing is appended). Appends of one run are
// serialized in the database.
func (s *Store) RunRawAppend(ctx context.Context, runID uuid.UUID, recs []thread.RawRecord) error {
	errs, err := s.RunRawAppendAll(ctx, []thread.RawAppend{{RunID: runID, Records: recs}})
	if err != nil {
		return err
	}
	return errs[0]
}

// RunRawAppendAll makes several runs' appends, each as RunRawAppend would,
// in one transaction and three round trips whatever their number. errs[i]
// answers apps[i] (nil, not_found, invalid_request: that append wrote
// nothing, the others went on); err is a failure of the whole write, which
// then wrote nothing. A run may appear once.
func (s *Store) RunRawAppendAll(ctx context.Context, apps []thread.RawAppend) (errs []error, err error) {
	errs = make([]error, len(apps))
	var todo []int // the valid appends, by run id (the order locks are taken in)
	for i, a := range apps {
		if errs[i] = checkRaw(a); errs[i] == nil && len(a.Records) > 0 {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return errs, nil
	}
	sort.Slice(todo, func(x, y int) bool { return bytes.Compare(apps[todo[x]].RunID[:], apps[todo[y]].RunID[:]) < 0 })
	now := s.clock()
	err = withTx(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, i := range todo {
			b.Queue(`SELECT pg_advisory_xact_lock(hashtextextended($1::text, $2))`, apps[i].RunID, rawLockSpace)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("lock raw records: %w", interpretError(err))
		}
		// A statement after the locks: it sees every append that committed
		// while this one waited.
		tails, err := rawTails(ctx, tx, apps, todo)
		if err != nil {
			return err
		}
		var rows rawRows
		for _, i := range todo {
			t, ok := tails[apps[i].RunID]
			if !ok {
				errs[i] = errcode.New(errcode.NotFound, "run %s not found", apps[i].RunID)
				continue
			}
			t.fit(&rows, apps[i].RunID, apps[i].Records, s.rawMaxBytes(), now)
		}
		if len(rows.n) == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `INSERT INTO run_raw (run_id, n, sequence, source, kind, data, total, created_at)
			SELECT r.run_id, r.n, r.sequence, r.source, r.kind, r.data::json, r.total, r.at
			FROM unnest($1::uuid[], $2::int[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::timestamptz[])
				AS r(run_id, n, sequence, source, kind, data, total, at)`,
			rows.run, rows.n, rows.seq, rows.source, rows.kind, rows.data, rows.total, rows.at)
		if err != nil {
			return fmt.Errorf("append raw records: %w", interpretError(err))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// checkRaw returns invalid_request for a record without a source or kind
// or whose data is not one JSON value.
func checkRaw(a thread.RawAppend) error {
	for i, r := range a.Records {
		if r.Source == "" || r.Kind == "" || !json.Valid(r.Data) {
			return errcode.New(errcode.Invalid, "raw record %d of run %s: want a source, a kind and JSON data", i+1, a.RunID)
		}
	}
	return nil
}

// rawTails returns the last raw record of each run of apps[todo] that
// exists (n 0: it has none); a run that does not exist is missing.
func rawTails(ctx context.Context, tx pgx.Tx, apps []thread.RawAppend, todo []int) (map[uuid.UUID]rawTail, error) {
	ids := make([]uuid.UUID, len(todo))
	for k, i := range todo {
		ids[k] = apps[i].RunID
	}
	rows, err := tx.Query(ctx, `SELECT ru.id, coalesce(t.n, 0), coalesce(t.total, 0), coalesce(t.source, ''), coalesce(t.kind, '')
		FROM runs ru LEFT JOIN LATERAL (SELECT n, total, source, kind FROM run_raw
			WHERE run_id = ru.id ORDER BY n DESC LIMIT 1) t ON true
		WHERE ru.id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("raw records' runs: %w", interpretError(err))
	}
	defer rows.Close()
	out := make(map[uuid.UUID]rawTail, len(ids))
	for rows.Next() {
		var id uuid.UUID
		var t rawTail
		if err := rows.Scan(&id, &t.n, &t.total, &t.source, &t.kind); err != nil {
			return nil, fmt.Errorf("raw records' runs: %w", interpretError(err))
		}
		out[id] = t
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("raw records' runs: %w", interpretError(err))
	}
	return out, nil
}

// rawTail is a run's last raw record (n 0: none).
type rawTail struct {
	n            int32
	total        int64
	source, kind string
}

// rawRows are records to insert, as columns.
type rawRows struct {
	run          []uuid.UUID
	n            []int32
	seq, total   []int64
	source, kind []string
	data         []string
	at           []time.Time
}

// fit adds to out the records of run recs, numbered after t, within max
// bytes of data; the first that does not fit becomes a truncation marker,
// and nothing is kept after a marker.
func (t rawTail) fit(out *rawRows, run uuid.UUID, recs []thread.RawRecord, max int64, now time.Time) {
	if t.source == thread.RawService && t.kind == thread.RawTruncated {
		return
	}
	n, total := t.n, t.total
	add := func(r thread.RawRecord, data string) {
		n++
		at := r.At
		if at.IsZero() {
			at = now
		}
		out.run = append(out.run, run)
		out.n = append(out.n, n)
		out.seq = append(out.seq, r.Sequence)
		out.source = append(out.source, r.Source)
		out.kind = append(out.kind, r.Kind)
		out.data = append(out.data, data)
		out.total = append(out.total, total)
		out.at = append(out.at, at.UTC())
	}
	for _, r := range recs {
		if total+int64(len(r.Data)) > max {
			add(thread.RawRecord{Sequence: r.Sequence, Source: thread.RawService, Kind: thread.RawTruncated, At: now},
				fmt.Sprintf(`{"max_bytes":%d,"first_dropped_sequence":%d}`, max, r.Sequence))
			return
		}
		total += int64(len(r.Data))
		add(r, string(r.Data))
	}
}

// rawPageMax bounds one page of RunRawList.
const rawPageMax = 1000

// RunRawList returns up to limit (at most 1000) of the run's raw records
// after record after (0: from the first), in order. It returns not_found
// when the run is unknown, not in the thread, or the thread is not the
// caller's.
func (s *Store) RunRawList(ctx context.Context, caller string, threadID, runID uuid.UUID, after int64, limit int) ([]thread.RawRecord, error) {
	if limit <= 0 || limit > rawPageMax {
		limit = rawPageMax
	}
	rows, err := s.pool.Query(ctx, `SELECT r.n, r.sequence, r.source, r.kind, r.data::text, r.created_at
		FROM runs ru JOIN threads t ON t.id = ru.thread_id
		LEFT JOIN LATERAL (SELECT n, sequence, source, kind, data, created_at FROM run_raw
			WHERE run_id = ru.id AND n > $4 ORDER BY n LIMIT $5) r ON true
		WHERE ru.id = $1 AND ru.thread_id = $2 AND t.caller = $3
		ORDER BY r.n`, runID, threadID, caller, after, limit)
	if err != nil {
		return nil, fmt.Errorf("raw records of run %s: %w", runID, interpretError(err))
	}
	defer rows.Close()
	found := false
	out := []thread.RawRecord{}
	for rows.Next() {
		found = true
		var (
			n, seq       *int64
			source, kind *string
			data         *string
			at           *time.Time
		)
		if err := rows.Scan(&n, &seq, &source, &kind, &data, &at); err != nil {
			return nil, fmt.Errorf("raw records of run %s: %w", runID, interpretError(err))
		}
		if n == nil {
			continue // the run, without records
		}
		out = append(out, thread.RawRecord{N: *n, Sequence: *seq, Source: *source, Kind: *kind, Data: json.RawMessage(*data), At: at.UTC()})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("raw records of run %s: %w", runID, interpretError(err))
	}
	if !found {
		return nil, errcode.New(errcode.NotFound, "run %s not found", runID)
	}
	return out, nil
}
