package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// warm runs a turn's writes and reads once on a new connection, in a
// transaction it rolls back. A Postgres backend's first turn otherwise
// loads the catalog entries of every table, index and trigger it touches,
// compiles the run guards' PL/pgSQL and plans the foreign-key checks:
// several times a turn's own cost, paid by whichever request first lands on the
// connection. The rollback leaves no row behind and waits for no disk
// flush. An error (the schema is not migrated yet) leaves the connection
// cold, never unusable.
func warm(ctx context.Context, conn *pgx.Conn) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("warm: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	now := time.Now().UTC().Truncate(time.Microsecond)
	const caller = "threadline-warm-up"
	th := uuid.New()
	if _, err := tx.Exec(ctx, sqlThreadInsert, th, caller, nil, []byte(`{}`), now, nil, nil, nil, nil, 0); err != nil {
		return fmt.Errorf("warm: create thread: %w", err)
	}
	// A run written whole (RunComplete), then one written in two steps
	// through the group commit (RunCreate, RunEventsAppend, RunFinish).
	in1, fin1 := warmRun(th, caller, uuid.Nil, 1, now)
	b := &pgx.Batch{}
	if err := queueComplete(b, in1, fin1, now); err != nil {
		return err
	}
	if err := execBatch(tx.SendBatch(ctx, b), b.Len(), "warm: complete run"); err != nil {
		return err
	}
	in2, fin2 := warmRun(th, caller, fin1.Assistant.ID, 3, now)
	b = &pgx.Batch{}
	queueOpen(b, in2)
	if err := queueStart(b, in2, fin2.Records[0]); err != nil {
		return err
	}
	if err := execBatch(tx.SendBatch(ctx, b), b.Len(), "warm: start run"); err != nil {
		return err
	}
	data, err := encodeLog([]thread.Segment{{RunID: in2.Run.ID, Records: fin2.Records[1:3]}})
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, sqlLogLock); err != nil {
		return fmt.Errorf("warm: lock the log: %w", err)
	}
	if _, err := tx.Exec(ctx, sqlLogAppend, data, []uuid.UUID{in2.Run.ID}, []int64{in2.Run.Claim}, []int64{neverChecked}); err != nil {
		return fmt.Errorf("warm: append events: %w", err)
	}
	b = &pgx.Batch{}
	if err := queueFinish(b, fin2, now); err != nil {
		return err
	}
	if err := execBatch(tx.SendBatch(ctx, b), b.Len(), "warm: finish run"); err != nil {
		return err
	}
	// The reads of a thread the service has not cached.
	if _, err := scanThread(tx.QueryRow(ctx, sqlThreadGet, th, caller)); err != nil {
		return fmt.Errorf("warm: get thread: %w", err)
	}
	rows, err := tx.Query(ctx, sqlCheckpointsAfter, th, 0)
	if err != nil {
		return fmt.Errorf("warm: read checkpoints: %w", err)
	}
	rows.Close()
	return rows.Err()
}

// warmLog runs the group commit's one statement once, in a transaction it
// rolls back.
func warmLog(ctx context.Context, conn *pgx.Conn) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("warm log: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	id := uuid.New()
	data, err := encodeLog([]thread.Segment{{RunID: id, Records: []thread.Record{{Seq: 2, Kind: thread.KindToken, Text: "warm"}}}})
	if err != nil {
		return err
	}
	// No such run: the claim check refuses it, and the statement is
	// planned and its function compiled all the same.
	if _, err := tx.Exec(ctx, sqlLogLock); err != nil {
		return fmt.Errorf("warm: lock the log: %w", err)
	}
	if _, err := tx.Exec(ctx, sqlLogAppend, data, []uuid.UUID{id}, []int64{0}, []int64{neverChecked}); err != nil {
		return fmt.Errorf("warm log: append events: %w", err)
	}
	return nil
}

// warmRun is a two-token run appending a user message under parent at
// sequence seq, and its end.
func warmRun(th uuid.UUID, caller string, parent uuid.UUID, seq int64, now time.Time) (thread.RunCreate, thread.RunFinish) {
	text := []checkpoint.Part{{Type: "text", Text: "warm"}}
	user := &checkpoint.Node{ID: uuid.New(), ThreadID: th, ParentID: parent, Seq: seq, Role: checkpoint.RoleUser, Content: text, CreatedAt: now}
	r := &thread.Run{ID: uuid.New(), ThreadID: th, Status: thread.RunRunning, UserMessageID: user.ID, ParentID: user.ID,
		MessageID: uuid.New(), Model: "warm", Config: thread.RunConfig{}, Owner: caller, LeaseUntil: now.Add(time.Minute),
		TreeSeq: seq, CreatedAt: now}
	user.RunID = r.ID
	recs := []thread.Record{
		{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: seq},
		{Seq: 2, Kind: thread.KindToken, Text: "wa"},
		{Seq: 3, Kind: thread.KindToken, Text: "rm"},
		{Seq: 4, Kind: thread.KindSnapshot, Status: thread.RunSucceeded, TreeSeq: seq + 1},
	}
	asst := checkpoint.Node{ID: r.MessageID, ThreadID: th, ParentID: user.ID, Seq: seq + 1, Role: checkpoint.RoleAssistant,
		Content: text, Status: &checkpoint.Status{Type: "complete", Reason: "stop"}, RunID: r.ID, CreatedAt: now}
	return thread.RunCreate{Caller: caller, Thread: th, User: user, Run: *r},
		thread.RunFinish{Run: r, Status: thread.RunSucceeded, Assistant: asst, Records: recs, Model: "warm", Title: "warm"}
}
