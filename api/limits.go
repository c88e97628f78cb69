package api

import (
	"sync"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint/errcode"
)

// streamCounts counts the NDJSON streams open in this process, per caller
// and the rejoins open per run, so that the streams' memory is bounded,
// one caller cannot hold every connection and one run's readers cannot
// crowd out the rest.
type streamCounts struct {
	mu       sync.Mutex
	total    int
	byCaller map[string]int
	byRun    map[uuid.UUID]int
}

func newStreamCounts() *streamCounts {
	return &streamCounts{byCaller: make(map[string]int), byRun: make(map[uuid.UUID]int)}
}

// acquire counts one stream of caller (and one rejoin of run, unless it is
// uuid.Nil), or refuses it: unavailable when the process has lim.all
// streams open, rate_limited when the caller or the run is at its limit
// (a limit < 0 is off). release undoes it.
func (s *streamCounts) acquire(caller string, run uuid.UUID, lim streamLimits) (release func(), err error) {
	perCaller, perRun := lim.perCaller, lim.perRun
	s.mu.Lock()
	defer s.mu.Unlock()
	if lim.all >= 0 && s.total >= lim.all {
		return nil, errcode.New(errcode.Unavailable, "this process has %d streams open; its limit is %d: retry later", s.total, lim.all)
	}
	if perCaller >= 0 && s.byCaller[caller] >= perCaller {
		return nil, errcode.New(errcode.RateLimited, "this caller has %d streams open; the limit is %d: close one first", s.byCaller[caller], perCaller)
	}
	if run != uuid.Nil && perRun >= 0 && s.byRun[run] >= perRun {
		return nil, errcode.New(errcode.RateLimited, "run %s has %d rejoined streams open; the limit is %d", run, s.byRun[run], perRun)
	}
	s.total++
	s.byCaller[caller]++
	if run != uuid.Nil {
		s.byRun[run]++
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.total--
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

// streamLimits are the caps acquire checks.
type streamLimits struct{ all, perCaller, perRun int }

func (s *Server) streamLimits() streamLimits {
	return streamLimits{all: s.cfg.StreamsPerProcess, perCaller: s.cfg.StreamsPerCaller, perRun: s.cfg.RejoinsPerRun}
}
