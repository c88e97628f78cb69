package runner

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine/internal/commit"
	"github.com/threadline/threadline/thread/engine/internal/runlog"
)

// Every run's event log is written by the engine's group commit
// (commit.GroupCommit): one goroutine writes what all runs produced since
// the last commit in one Store.RunEventsAppend, then publishes it (see
// publish); a run whose claim the store refuses is dropped from it and
// stopped (Active.lose).

// committer is the service's group commit of run logs.
type committer = commit.GroupCommit[thread.Record, *logWriter]

// logWriter is one run's side of the group commit (keyed with itself):
// its run, and the running snapshots of its interim snapshot records.
type logWriter struct {
	*commit.LogWriter[thread.Record, *logWriter]
	run *thread.Run

	mu sync.Mutex
	// snaps are the running snapshots of interim snapshot records by
	// sequence, for publishing them.
	snaps map[int64]*thread.Snapshot
	// subs are the child events of subagent records, by sequence, that
	// hold a snapshot (a tree the record does not), for publishing them.
	subs map[int64]thread.Event
}

func newCommitter(s *Runner) *committer {
	publish := func(w *commit.LogWriter[thread.Record, *logWriter], recs []thread.Record, since time.Time) {
		s.publish(w.Key, recs, since)
	}
	purge := func(ctx context.Context) (bool, error) { return s.store.RunLogPurge(ctx) }
	return commit.NewGroupCommit(s.appendEvents, publish, purge, s.log)
}

// newLogWriter returns the writer of r's log; lost is called once if the
// store refuses r's claim.
func (s *Runner) newLogWriter(r *thread.Run, lost func()) *logWriter {
	w := &logWriter{run: r}
	w.LogWriter = s.commits.Writer(r.ID, w, runlog.FirstRecord(r), lost)
	return w
}

// appendEvents writes a group commit's segments (Store.RunEventsAppend),
// and names the runs whose claim the store refused.
func (s *Runner) appendEvents(ctx context.Context, segs []commit.Segment[thread.Record, *logWriter]) ([]uuid.UUID, error) {
	out := make([]thread.Segment, len(segs))
	for i, sg := range segs {
		out[i] = thread.Segment{RunID: sg.Key.run.ID, Claim: sg.Key.run.Claim, Records: sg.Records}
	}
	err := s.store.RunEventsAppend(ctx, out)
	var lost *thread.ClaimLostError
	if errors.As(err, &lost) && len(lost.Runs) > 0 {
		return lost.Runs, err
	}
	return nil, err
}

// setSnapshot records the snapshot an interim snapshot record of seq shows.
func (w *logWriter) setSnapshot(seq int64, snap *thread.Snapshot) {
	w.mu.Lock()
	if w.snaps == nil {
		w.snaps = map[int64]*thread.Snapshot{}
	}
	w.snaps[seq] = snap
	w.mu.Unlock()
}

// snapshot returns the snapshot of the interim snapshot record of seq.
func (w *logWriter) snapshot(seq int64) *thread.Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.snaps[seq]
}

// recordEvent is thread.RecordEvent, with a subagent record's child
// snapshot as the child's follower got it (w may be nil: then none).
func (w *logWriter) recordEvent(r *thread.Run, rec *thread.Record) thread.Event {
	ev := thread.RecordEvent(r, rec)
	if ev.Sub != nil && w != nil {
		w.mu.Lock()
		if child, ok := w.subs[rec.Seq]; ok {
			ev.Sub.Event = child
		}
		w.mu.Unlock()
	}
	return ev
}

// setSub keeps the child event of the subagent record of seq.
func (w *logWriter) setSub(seq int64, ev thread.Event) {
	w.mu.Lock()
	if w.subs == nil {
		w.subs = map[int64]thread.Event{}
	}
	w.subs[seq] = ev
	w.mu.Unlock()
}
