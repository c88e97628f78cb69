package thread

import (
	"context"
	"sync"
	"time"
)

// starter writes the starts of runs whose linger ran out. Every start that
// is pending when a write begins goes into that write: one round trip and
// one commit for all of them (Store.RunCreateAll). A burst of new runs then
// keeps one connection busy instead of a pool's worth, each with its own
// commit. A write of several starts is all or nothing, so when it is
// refused each start is written again alone and gets its own answer.
type starter struct {
	s       *Service
	mu      sync.Mutex
	pending []*startReq
	kick    chan struct{}
}

type startReq struct {
	in    RunCreate
	first Record
	done  chan error
}

func newStarter(s *Service) *starter {
	st := &starter{s: s, kick: make(chan struct{}, 1)}
	go st.loop()
	return st
}

// start writes one run's start and returns the store's answer.
func (st *starter) start(in RunCreate, first Record) error {
	req := &startReq{in: in, first: first, done: make(chan error, 1)}
	st.mu.Lock()
	st.pending = append(st.pending, req)
	st.mu.Unlock()
	select {
	case st.kick <- struct{}{}:
	default:
	}
	return <-req.done
}

func (st *starter) loop() {
	for range st.kick {
		st.mu.Lock()
		batch := st.pending
		st.pending = nil
		st.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if len(batch) > 1 {
			ins, firsts := make([]RunCreate, len(batch)), make([]Record, len(batch))
			for i, r := range batch {
				ins[i], firsts[i] = r.in, r.first
			}
			if err := st.s.store.RunCreateAll(ctx, ins, firsts); err == nil {
				for _, r := range batch {
					r.done <- nil
				}
				cancel()
				continue
			}
		}
		for _, r := range batch {
			_, err := st.s.store.RunCreate(ctx, r.in, r.first)
			r.done <- err
		}
		cancel()
	}
}
