package thread

import "github.com/threadline/threadline/thread/engine"

// A run's raw log (what its provider streamed, what its tools were given
// and answered) is kept by the engine's RawWriter; these are its records,
// named here for the Store and the api (see package engine).
type (
	// RawRecord is one record of a run's raw log (engine.RawRecord).
	RawRecord = engine.RawRecord
	// RawAppend is one run's records for RawStore.RunRawAppendAll.
	RawAppend = engine.RawAppend
	// RawStore keeps runs' raw records durably; *store.Store is one.
	RawStore = engine.RawStore
)

// Raw record sources and kinds (see package engine).
const (
	RawProvider  = engine.RawProvider
	RawTool      = engine.RawTool
	RawService   = engine.RawService
	RawChunk     = engine.RawChunk
	RawCall      = engine.RawCall
	RawTruncated = engine.RawTruncated
	RawDropped   = engine.RawDropped
)

// The engine's RawWriter is the RawSink of a service that keeps raw
// records.
var _ RawSink = (*engine.RawWriter)(nil)
