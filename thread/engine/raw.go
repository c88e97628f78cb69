package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine/internal/lifecycle"
)

// Raw writer settings.
const (
	// rawFlushEvery is how often queued records are written.
	rawFlushEvery = 250 * time.Millisecond
	// rawMaxQueued bounds the bytes of data queued over all runs; records
	// that arrive over it are dropped and counted (a thread.RawDropped record).
	rawMaxQueued = 64 << 20
	// rawMaxMisses is how many writes of a run's records may fail in a row
	// (its start not yet committed, a database outage, its thread
	// deleted) before they are dropped.
	rawMaxMisses = 20
	// rawWriteTimeout bounds one write, and the last flush at Stop.
	rawWriteTimeout = 10 * time.Second
)

var _ thread.RawSink = (*RawWriter)(nil)

// RawWriter is the thread.RawSink of a service that keeps raw records: Append
// queues a record and never blocks, and its goroutine (Start, Stop) writes
// each run's queue to a thread.RawStore every flush interval and at Stop.
type RawWriter struct {
	store  thread.RawStore
	log    *slog.Logger
	every  time.Duration
	max    int
	misses int

	mu     sync.Mutex
	queues map[uuid.UUID]*rawQueue
	queued int // bytes of data queued
	open   bool
	life   lifecycle.Lifecycle
}

// rawQueue is one run's records waiting to be written.
type rawQueue struct {
	recs    []thread.RawRecord
	dropped int   // records dropped over the bound since the last write
	dropSeq int64 // the sequence of the first of them
	misses  int   // failed writes in a row
}

// NewRawWriter returns a writer to st, logging to log (slog's default
// when nil). Start it before the service runs, Stop it after the
// service's Shutdown.
func NewRawWriter(st thread.RawStore, log *slog.Logger) *RawWriter {
	if log == nil {
		log = slog.Default()
	}
	return &RawWriter{store: st, log: log, every: rawFlushEvery, max: rawMaxQueued, misses: rawMaxMisses,
		queues: map[uuid.UUID]*rawQueue{}}
}

// Start starts the writer's goroutine.
func (w *RawWriter) Start() {
	w.mu.Lock()
	w.open = true
	w.mu.Unlock()
	w.life.Start(w.loop)
}

// Stop writes what is queued (within rawWriteTimeout) and stops the
// goroutine; records appended later are dropped.
func (w *RawWriter) Stop() { w.life.Stop() }

// Append implements thread.RawSink: it queues the record and returns at once. A
// "provider" record becomes a thread.RawChunk, a "provider_sent" record a
// provider thread.RawSent, a "tool" record a thread.RawCall; a
// record over the queue's bound is dropped and counted.
func (w *RawWriter) Append(runID uuid.UUID, seq int64, kind string, payload json.RawMessage) {
	r := thread.RawRecord{Sequence: seq, Source: kind, Kind: kind, Data: payload, At: time.Now().UTC()}
	switch kind {
	case thread.RawProvider:
		r.Kind = thread.RawChunk
	case thread.RawProviderSent:
		r.Source, r.Kind = thread.RawProvider, thread.RawSent
	case thread.RawTool:
		r.Kind = thread.RawCall
	}
	w.add(runID, r)
}

// add queues recs of run runID.
func (w *RawWriter) add(runID uuid.UUID, recs ...thread.RawRecord) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.open {
		return
	}
	q := w.queues[runID]
	if q == nil {
		q = &rawQueue{}
		w.queues[runID] = q
	}
	for _, r := range recs {
		if w.queued+len(r.Data) > w.max {
			if q.dropped == 0 {
				q.dropSeq = r.Sequence
			}
			q.dropped++
			continue
		}
		w.queued += len(r.Data)
		q.recs = append(q.recs, r)
	}
}

func (w *RawWriter) loop(stop <-chan struct{}) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			w.mu.Lock()
			w.open = false
			w.mu.Unlock()
			w.flush(true)
			w.mu.Lock()
			clear(w.queues)
			w.queued = 0
			w.mu.Unlock()
			return
		case <-t.C:
			w.flush(false)
		}
	}
}

// rawBatch is one run's records taken for a write.
type rawBatch struct {
	run   uuid.UUID
	recs  []thread.RawRecord
	bytes int
}

// take removes every run's queued records for a write, and forgets runs
// that have none.
func (w *RawWriter) take() []rawBatch {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []rawBatch
	for id, q := range w.queues {
		b := rawBatch{run: id, recs: q.recs}
		for _, r := range q.recs {
			b.bytes += len(r.Data)
		}
		if q.dropped > 0 {
			data := fmt.Sprintf(`{"records":%d,"reason":"the service's raw writer was behind the database"}`, q.dropped)
			b.recs = append(b.recs, thread.RawRecord{Sequence: q.dropSeq, Source: thread.RawService, Kind: thread.RawDropped, Data: json.RawMessage(data), At: time.Now().UTC()})
		}
		q.recs, q.dropped = nil, 0
		if len(b.recs) > 0 {
			out = append(out, b)
		} else {
			delete(w.queues, id) // add makes it again
		}
	}
	return out
}

// rawRunsPerWrite bounds the runs of one RunRawAppendAll.
const rawRunsPerWrite = 256

// flush writes every run's queued records, rawRunsPerWrite runs a write. A
// write that fails is tried again at the next flush, before the run's
// newer records (a run's start may not be committed yet when its first
// records come), unless it failed w.misses times in a row, the store
// refused the records as invalid, or this is the last flush: then they
// are dropped and logged.
func (w *RawWriter) flush(final bool) {
	batches := w.take()
	ctx, cancel := context.WithTimeout(context.Background(), rawWriteTimeout)
	defer cancel()
	for len(batches) > 0 {
		part := batches[:min(len(batches), rawRunsPerWrite)]
		batches = batches[len(part):]
		apps := make([]thread.RawAppend, len(part))
		for i, b := range part {
			apps[i] = thread.RawAppend{RunID: b.run, Records: b.recs}
		}
		errs, err := w.store.RunRawAppendAll(ctx, apps)
		for i, b := range part {
			if err == nil {
				w.settle(b, errs[i], final)
			} else {
				w.settle(b, err, final)
			}
		}
	}
}

// settle releases a written batch's bytes from the bound, or queues a
// failed one again in front of the run's newer records.
func (w *RawWriter) settle(b rawBatch, err error, final bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queued -= b.bytes
	q := w.queues[b.run]
	if q == nil { // only settle forgets a queue whose records were taken
		return
	}
	forget := func() {
		if final || (len(q.recs) == 0 && q.dropped == 0) {
			delete(w.queues, b.run)
		}
	}
	if err == nil {
		q.misses = 0
		forget()
		return
	}
	if final || errcode.Of(err) == errcode.Invalid || q.misses+1 >= w.misses {
		w.log.Warn("raw records dropped", "run_id", b.run, "records", len(b.recs), "err", err)
		q.misses = 0
		forget()
		return
	}
	q.misses++
	q.recs = append(b.recs, q.recs...)
	w.queued += b.bytes
}
