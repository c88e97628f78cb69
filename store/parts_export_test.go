package store

import "time"

// DecodeParts, MarshalParts and UnmarshalParts expose the content codec
// to the external tests.
var (
	DecodeParts    = decodeParts
	MarshalParts   = marshalParts
	UnmarshalParts = unmarshalParts
)

// HotStatements is how many statements afterConnect prepares.
var HotStatements = len(hotSQL)

// Warm and Ready expose a new connection's set-up steps to the external
// tests and benchmarks.
var (
	Warm    = warm
	WarmLog = warmLog
	Ready   = ready
)

// SetSpillAfter sets how old a run_log row gets before RunLogPurge moves
// running runs' segments out of it.
func SetSpillAfter(s *Store, d time.Duration) { s.spillAfter = d }

// SetSearchTuning sets how many matches of a common query MessageSearch
// ranks, the expected share of matches that makes a query common, and the
// fewest messages for any query to be common (< 0: none).
func (s *Store) SetSearchTuning(window int, share, minRows float64) {
	s.search = searchTuning{window: window, share: share, minRows: minRows}
}
