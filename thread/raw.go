package thread

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// A run's raw log: what its provider streamed, what its tools were given
// and answered (see RawSink), kept for audit.

// Raw record sources: the kind the run loop hands RawSink.Append, and the
// service's own notes.
const (
	// RawProvider records are what the model's provider streamed.
	RawProvider = "provider"
	// RawProviderSent is the kind a run loop hands RawSink.Append for a
	// line the model sent its provider (an ACP agent's JSON-RPC); it is
	// kept as source RawProvider, kind RawSent.
	RawProviderSent = "provider_sent"
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
	// RawSent is one line the service sent the provider, where the
	// exchange is lines both ways (an ACP agent's JSON-RPC; RawChunk
	// records are then the lines the agent sent); Data is that line as a
	// JSON string.
	RawSent = "sent"
	// RawCall is a server tool call: Data is {"tool_call_id", "tool_name",
	// "input", "output", "is_error"} (see RawSink).
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
	// run loop numbers it: see RawSink).
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
