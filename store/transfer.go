package store

// Whole threads in and out: the export's consistent read of a thread, and
// the import's one-transaction write of many threads with COPY.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/threadline/threadline/thread"
)

var _ thread.TransferStore = (*Store)(nil)

// ThreadExport reads the caller's thread, all its checkpoints in Seq order
// and all its runs in start order from one snapshot; not_found for an
// unknown or foreign thread.
func (s *Store) ThreadExport(ctx context.Context, caller string, id uuid.UUID) (*thread.ThreadExport, error) {
	var out thread.ThreadExport
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		t, err := scanThread(tx.QueryRow(ctx, sqlThreadGet, id, caller))
		if errors.Is(err, pgx.ErrNoRows) {
			return notFoundThread(id)
		}
		if err != nil {
			return fmt.Errorf("export thread: %w", interpretError(err))
		}
		out.Thread = t
		rows, err := tx.Query(ctx, sqlCheckpointsAfter, id, int64(0))
		if err != nil {
			return fmt.Errorf("export checkpoints: %w", interpretError(err))
		}
		if out.Nodes, err = pgx.CollectRows(rows, scanCheckpoint); err != nil {
			return fmt.Errorf("export checkpoints: %w", interpretError(err))
		}
		rows, err = tx.Query(ctx, `SELECT `+runCols+` FROM runs WHERE thread_id = $1 ORDER BY created_at, id`, id)
		if err != nil {
			return fmt.Errorf("export runs: %w", interpretError(err))
		}
		out.Runs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (*thread.Run, error) { return scanRun(r) })
		if err != nil {
			return fmt.Errorf("export runs: %w", interpretError(err))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ThreadRefs lists the threads of caller, or of every caller when all is
// set, by caller, then creation, then id: what an export of many threads
// walks.
func (s *Store) ThreadRefs(ctx context.Context, caller string, all bool) ([]thread.ThreadRef, error) {
	rows, err := s.pool.Query(ctx, `SELECT caller, id FROM threads WHERE $2 OR caller = $1 ORDER BY caller, created_at, id`, caller, all)
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", interpretError(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (thread.ThreadRef, error) {
		var ref thread.ThreadRef
		err := r.Scan(&ref.Caller, &ref.ID)
		return ref, err
	})
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", interpretError(err))
	}
	return out, nil
}

// importBatch is about how many checkpoints an import gathers before it
// writes them with COPY.
const importBatch = 5000

// ThreadImport writes the threads next yields for caller in one
// transaction (see thread.TransferStore): threads, checkpoints and runs
// go in batches by COPY, and the checkpoints' constraints check every
// parent. A thread whose id or a run id is taken, by any caller or earlier
// in the same import, is written under new ids. Errors: next's own, and
// invalid_request or invalid_fork for a row the database refuses; nothing
// is written then.
func (s *Store) ThreadImport(ctx context.Context, caller string, next func() (*thread.ImportThread, error)) ([]thread.Imported, error) {
	var out []thread.Imported
	err := withTx(ctx, s.pool, func(tx pgx.Tx) error {
		w := importWriter{tx: tx, caller: caller, now: s.clock(), used: map[uuid.UUID]bool{}, files: map[uuid.UUID]bool{}}
		for {
			it, err := next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			w.batch = append(w.batch, it)
			if w.nodes += len(it.Nodes); w.nodes >= importBatch {
				if err := w.flush(ctx); err != nil {
					return err
				}
			}
		}
		if err := w.flush(ctx); err != nil {
			return err
		}
		out = w.done
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

type importWriter struct {
	tx     pgx.Tx
	caller string
	now    time.Time
	used   map[uuid.UUID]bool // thread and run ids this import wrote
	files  map[uuid.UUID]bool // attachment ids this import wrote
	batch  []*thread.ImportThread
	nodes  int
	done   []thread.Imported
}

// flush writes the gathered threads: one query for ids already taken,
// then three COPYs.
func (w *importWriter) flush(ctx context.Context) error {
	if len(w.batch) == 0 {
		return nil
	}
	if err := w.renewTaken(ctx); err != nil {
		return err
	}
	files, err := w.placeFiles(ctx)
	if err != nil {
		return err
	}
	var threads, nodes, runs, logs [][]any
	for _, it := range w.batch {
		t := &it.Thread
		md := t.Metadata
		if len(md) == 0 {
			md = json.RawMessage(`{}`)
		}
		var head *uuid.UUID
		if it.Head != uuid.Nil {
			head = &it.Head
		}
		threads = append(threads, []any{t.ID, w.caller, t.Title, []byte(md), head, t.LastSeq, t.CreatedAt, t.UpdatedAt})
		seqs := make(map[uuid.UUID]int64, len(it.Nodes))
		for i := range it.Nodes {
			n := &it.Nodes[i]
			n.ThreadID = t.ID
			args, err := checkpointArgs(n)
			if err != nil {
				return err
			}
			nodes = append(nodes, args)
			seqs[n.ID] = n.Seq
			if n.RunID != uuid.Nil {
				seqs[n.RunID] = max(seqs[n.RunID], n.Seq)
			}
		}
		for i := range it.Runs {
			args, log, err := importRunArgs(&it.Runs[i], t.ID, seqs)
			if err != nil {
				return err
			}
			runs, logs = append(runs, args), append(logs, log)
		}
		w.done = append(w.done, thread.Imported{ThreadID: t.ID, Title: t.Title, Messages: len(it.Nodes)})
	}
	w.batch, w.nodes = w.batch[:0], 0
	copies := []struct {
		table string
		cols  []string
		rows  [][]any
	}{
		{"threads", []string{"id", "caller", "title", "metadata", "head_id", "last_seq", "created_at", "updated_at"}, threads},
		{"checkpoints", []string{"thread_id", "id", "parent_id", "seq", "role", "content", "status", "attachments", "run_id", "created_at"}, nodes},
		{"runs", []string{"id", "thread_id", "status", "user_message_id", "parent_id", "message_id", "model", "config", "usage", "error", "tree_seq", "created_at", "finished_at"}, runs},
		{"attachments", []string{"id", "caller", "name", "content_type", "size", "data", "created_at"}, files},
		{"run_events", []string{"run_id", "first_seq", "last_seq", "data"}, logs},
	}
	for _, c := range copies {
		if len(c.rows) == 0 {
			continue
		}
		if _, err := w.tx.CopyFrom(ctx, pgx.Identifier{c.table}, c.cols, pgx.CopyFromRows(c.rows)); err != nil {
			return fmt.Errorf("import %s: %w", c.table, interpretError(err))
		}
	}
	return nil
}

// renewTaken gives new ids to the threads of the batch whose thread id or
// a run id is taken, in the database or earlier in this import.
func (w *importWriter) renewTaken(ctx context.Context) error {
	var tids, rids []uuid.UUID
	for _, it := range w.batch {
		tids = append(tids, it.Thread.ID)
		for _, r := range it.Runs {
			rids = append(rids, r.ID)
		}
	}
	rows, err := w.tx.Query(ctx, `SELECT id FROM threads WHERE id = ANY($1) UNION ALL SELECT id FROM runs WHERE id = ANY($2)`, tids, rids)
	if err != nil {
		return fmt.Errorf("import: %w", interpretError(err))
	}
	taken, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return fmt.Errorf("import: %w", interpretError(err))
	}
	for _, id := range taken {
		w.used[id] = true
	}
	for _, it := range w.batch {
		clash := w.used[it.Thread.ID]
		for _, r := range it.Runs {
			clash = clash || w.used[r.ID]
		}
		if clash {
			it.Renew()
		}
		w.used[it.Thread.ID] = true
		for _, r := range it.Runs {
			w.used[r.ID] = true
		}
	}
	return nil
}

// placeFiles returns the rows of the batch's inline attachments to
// store: one the caller has already is not stored again, and one whose id
// is another caller's is stored under a new id, which its thread's
// messages then name.
func (w *importWriter) placeFiles(ctx context.Context) ([][]any, error) {
	var ids []uuid.UUID
	for _, it := range w.batch {
		for _, f := range it.Files {
			ids = append(ids, f.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := w.tx.Query(ctx, `SELECT id, caller FROM attachments WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("import attachments: %w", interpretError(err))
	}
	owners := map[uuid.UUID]string{}
	var id uuid.UUID
	var owner string
	if _, err := pgx.ForEachRow(rows, []any{&id, &owner}, func() error { owners[id] = owner; return nil }); err != nil {
		return nil, fmt.Errorf("import attachments: %w", interpretError(err))
	}
	var out [][]any
	for _, it := range w.batch {
		for i := 0; i < len(it.Files); i++ {
			f := it.Files[i]
			if o, taken := owners[f.ID]; (taken && o == w.caller) || w.files[f.ID] {
				continue // the caller has it
			} else if taken {
				it.RenameAttachment(f.ID, uuid.New())
				f = it.Files[i]
			}
			w.files[f.ID] = true
			out = append(out, []any{f.ID, w.caller, f.Name, f.ContentType, int64(len(f.Data)), f.Data, w.now})
		}
	}
	return out, nil
}

// importRunArgs returns an imported run's row, and its event log: one
// final snapshot of the tree as the run left it, so that a rejoin of the
// run ends as any ended run's does.
func importRunArgs(r *thread.Run, threadID uuid.UUID, seqs map[uuid.UUID]int64) (row, log []any, err error) {
	var cfg, usage, rerr []byte
	if cfg, err = marshalRunConfig(&r.Config); err != nil {
		return nil, nil, fmt.Errorf("run %s config: %w", r.ID, err)
	}
	if r.Usage != nil {
		usage = marshalUsage(r.Usage)
	}
	if r.Error != nil {
		rerr = marshalRunError(r.Error)
	}
	var user *uuid.UUID
	if r.UserMessageID != uuid.Nil {
		user = &r.UserMessageID
	}
	// The tree the run ended on: up to the newest checkpoint it wrote.
	endSeq := seqs[r.ID]
	if endSeq == 0 {
		endSeq = seqs[r.MessageID]
	}
	data, err := encodeSegment([]thread.Record{{Seq: 1, Kind: thread.KindSnapshot, Status: r.Status, TreeSeq: endSeq}}, false, "")
	if err != nil {
		return nil, nil, fmt.Errorf("run %s log: %w", r.ID, err)
	}
	row = []any{r.ID, threadID, string(r.Status), user, r.ParentID, r.MessageID, r.Model, cfg, usage, rerr, max(endSeq-1, 0), r.CreatedAt, r.FinishedAt}
	return row, []any{r.ID, int64(1), int64(1), data}, nil
}
