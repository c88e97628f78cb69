package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/errcode"
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
	if len(recs) == 0 {
		return nil
	}
	for i, r := range recs {
		if r.Source == "" || r.Kind == "" || !json.Valid(r.Data) {
			return errcode.New(errcode.Invalid, "raw record %d of run %s: want a source, a kind and JSON data", i+1, runID)
		}
	}
	now := s.clock()
	return withTx(ctx, s.pool, func(tx pgx.Tx) error {
		var last rawTail
		b := &pgx.Batch{}
		b.Queue(`SELECT pg_advisory_xact_lock(hashtextextended($1::text, $2))`, runID, rawLockSpace)
		b.Queue(`SELECT EXISTS (SELECT 1 FROM runs WHERE id = $1)`, runID)
		b.Queue(`SELECT n, total, source, kind FROM run_raw WHERE run_id = $1 ORDER BY n DESC LIMIT 1`, runID)
		br := tx.SendBatch(ctx, b)
		_, err := br.Exec()
		var exists bool
		if err == nil {
			err = br.QueryRow().Scan(&exists)
		}
		if err == nil {
			err = br.QueryRow().Scan(&last.n, &last.total, &last.source, &last.kind)
			if err == pgx.ErrNoRows {
				err = nil
			}
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("raw records of run %s: %w", runID, interpretError(err))
		}
		if !exists {
			return errcode.New(errcode.NotFound, "run %s not found", runID)
		}
		rows := last.fit(recs, s.rawMaxBytes(), now)
		if len(rows.n) == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `INSERT INTO run_raw (run_id, n, sequence, source, kind, data, total, created_at)
			SELECT $1, r.n, r.sequence, r.source, r.kind, r.data::json, r.total, r.at
			FROM unnest($2::int[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::timestamptz[])
				AS r(n, sequence, source, kind, data, total, at)`,
			runID, rows.n, rows.seq, rows.source, rows.kind, rows.data, rows.total, rows.at)
		if err != nil {
			return fmt.Errorf("append raw records of run %s: %w", runID, interpretError(err))
		}
		return nil
	})
}

// rawTail is a run's last raw record (n 0: none).
type rawTail struct {
	n            int32
	total        int64
	source, kind string
}

// rawRows are records to insert, as columns.
type rawRows struct {
	n            []int32
	seq, total   []int64
	source, kind []string
	data         []string
	at           []time.Time
}

// fit numbers recs after t and keeps those within max bytes of data; the
// first that does not fit becomes a truncation marker, and nothing is kept
// after a marker.
func (t rawTail) fit(recs []thread.RawRecord, max int64, now time.Time) rawRows {
	var out rawRows
	if t.source == thread.RawService && t.kind == thread.RawTruncated {
		return out
	}
	n, total := t.n, t.total
	add := func(r thread.RawRecord, data string) {
		n++
		at := r.At
		if at.IsZero() {
			at = now
		}
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
			return out
		}
		total += int64(len(r.Data))
		add(r, string(r.Data))
	}
	return out
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
