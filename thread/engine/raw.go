package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/thread/errcode"
)

// Raw record sources: the kind the run loop hands thread.RawSink.Append, and the
// service's own notes.
const (
	// RawProvider records are what the model's provider streamed.
	RawProvider = "provider"
	// RawTool records are server tool calls.
	RawTool = "tool"
	// RawService records are the service's notes in a run's raw log:
	// records it dropped (kinds RawTruncated and RawDropped).
	RawService = "service"
)

// Raw record kinds.
const (
	// RawChunk is one line of the provider's response as received (an SSE
	// line, a line of a JSON array, an NDJSON line); Data is that line as a
	// JSON string.
	RawChunk = "chunk"
	// RawCall is a server tool call: Data is {"tool_call_id", "tool_name",
	// "input", "output", "is_error"} (see thread.RawSink).
	RawCall = "call"
	// RawTruncated is the last record of a run whose records reached the
	// store's cap: Data is {"max_bytes", "first_dropped_sequence"}, and no
	// record of the run is kept after it.
	RawTruncated = "truncated"
	// RawDropped says the raw writer dropped records because the store
	// could not keep up: Data is {"records", "reason"}.
	RawDropped = "dropped"
)

// RawRecord is one record of a run's raw log, for audit and replay: what
// the provider streamed and what each tool was given and answered. Raw
// records are never part of a snapshot or a stream.
type RawRecord struct {
	// N is the record's place in the run's raw log, from 1; the store sets
	// it when it reads (ignored on append).
	N int64
	// Sequence is the sequence of the event the record produced (as the
	// run loop numbers it: see thread.RawSink).
	Sequence int64
	// Source is RawProvider, RawTool or RawService.
	Source string
	// Kind is RawChunk, RawCall, RawTruncated or RawDropped.
	Kind string
	// Data is a JSON value (see the kinds).
	Data json.RawMessage
	// At is when the service received it (the append's time when zero).
	At time.Time
}

// RawAppend is one run's records for RawStore.RunRawAppendAll.
type RawAppend struct {
	RunID   uuid.UUID
	Records []RawRecord
}

// RawStore keeps runs' raw records durably; *store.Store is one.
type RawStore interface {
	// RunRawAppendAll appends each run's records to its raw log, in order,
	// up to the store's cap per run: the first record over it is replaced
	// by a RawTruncated record, and records after that are dropped. All in
	// one write: errs[i] answers apps[i], not_found when the run does not
	// exist (yet, or any more) and invalid_request for a record without a
	// source or kind or whose data is not JSON (that append writes
	// nothing); err is a failure of the whole write, which wrote nothing.
	RunRawAppendAll(ctx context.Context, apps []RawAppend) (errs []error, err error)
}

// Raw writer settings.
const (
	// rawFlushEvery is how often queued records are written.
	rawFlushEvery = 250 * time.Millisecond
	// rawMaxQueued bounds the bytes of data queued over all runs; records
	// that arrive over it are dropped and counted (a RawDropped record).
	rawMaxQueued = 64 << 20
	// rawMaxMisses is how many writes of a run's records may fail in a row
	// (its start not yet committed, a database outage, its thread
	// deleted) before they are dropped.
	rawMaxMisses = 20
	// rawWriteTimeout bounds one write, and the last flush at Stop.
	rawWriteTimeout = 10 * time.Second
)

// RawWriter is the thread.RawSink of a service that keeps raw records: Append
// queues a record and never blocks, and its goroutine (Start, Stop) writes
// each run's queue to a RawStore every flush interval and at Stop.
type RawWriter struct {
	store  RawStore
	log    *slog.Logger
	every  time.Duration
	max    int
	misses int

	mu     sync.Mutex
	queues map[uuid.UUID]*rawQueue
	queued int // bytes of data queued
	open   bool
	life   Lifecycle
}

// rawQueue is one run's records waiting to be written.
type rawQueue struct {
	recs    []RawRecord
	dropped int   // records dropped over the bound since the last write
	dropSeq int64 // the sequence of the first of them
	misses  int   // failed writes in a row
}

// NewRawWriter returns a writer to st, logging to log (slog's default
// when nil). Start it before the service runs, Stop it after the
// service's Shutdown.
func NewRawWriter(st RawStore, log *slog.Logger) *RawWriter {
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
// "provider" record becomes a RawChunk, a "tool" record a RawCall; a
// record over the queue's bound is dropped and counted.
func (w *RawWriter) Append(runID uuid.UUID, seq int64, kind string, payload json.RawMessage) {
	r := RawRecord{Sequence: seq, Source: kind, Kind: kind, Data: payload, At: time.Now().UTC()}
	switch kind {
	case RawProvider:
		r.Kind = RawChunk
	case RawTool:
		r.Kind = RawCall
	}
	w.add(runID, r)
}

// add queues recs of run runID.
func (w *RawWriter) add(runID uuid.UUID, recs ...RawRecord) {
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
	recs  []RawRecord
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
			b.recs = append(b.recs, RawRecord{Sequence: q.dropSeq, Source: RawService, Kind: RawDropped, Data: json.RawMessage(data), At: time.Now().UTC()})
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
		apps := make([]RawAppend, len(part))
		for i, b := range part {
			apps[i] = RawAppend{RunID: b.run, Records: b.recs}
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
