package api

import (
	"sync"

	"github.com/google/uuid"

	"github.com/threadline/threadline/thread/errcode"
)

// streamCounts counts the NDJSON streams open per caller and the rejoins
// open per run, so that one caller cannot hold every connection and one
// run's readers cannot each hold a copy of its log.
type streamCounts struct {
	mu       sync.Mutex
	byCaller map[string]int
	byRun    map[uuid.UUID]int
}

func newStreamCounts() *streamCounts {
	return &streamCounts{byCaller: make(map[string]int), byRun: make(map[uuid.UUID]int)}
}

// acquire counts one stream of caller (and one rejoin of run, unless it is
// uuid.Nil), or refuses it with rate_limited when either is at its limit
// (a limit < 0 is off). release undoes it.
func (s *streamCounts) acquire(caller string, run uuid.UUID, perCaller, perRun int) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if perCaller >= 0 && s.byCaller[caller] >= perCaller {
		return nil, errcode.New(errcode.RateLimited, "this caller has %d streams open; the limit is %d: close one first", s.byCaller[caller], perCaller)
	}
	if run != uuid.Nil && perRun >= 0 && s.byRun[run] >= perRun {
		return nil, errcode.New(errcode.RateLimited, "run %s has %d rejoined streams open; the limit is %d", run, s.byRun[run], perRun)
	}
	s.byCaller[caller]++
	if run != uuid.Nil {
		s.byRun[run]++
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.byCaller[caller]--; s.byCaller[caller] <= 0 {
			delete(s.byCaller, caller)
		}
		if run != uuid.Nil {
			if s.byRun[run]--; s.byRun[run] <= 0 {
				delete(s.byRun, run)
			}
		}
	}, nil
}
