package thread

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread/errcode"
)

// relay brings the runs that other processes own to this process's
// followers with one reader per run, however many follow it. On a wake-up
// for run R (another process committed to R's log), R's reader reads the
// new records once from the durable log and publishes them on the relay's
// hub, to which every local follower of R subscribes. The log stays the
// source of truth: a follower reads it before it takes live events and
// again after any gap, and a follower that falls behind is dropped by the
// hub (the reader never waits for it) and rejoins from its sequence. A
// reader also reads after a quiet spell without wake-ups (the safety net),
// and stops when its last follower leaves or its run ended or is gone.
// It is used only with wake-ups (Config.Wakeups).
type relay struct {
	s   *Service
	hub *stream.Hub[Event]

	mu      sync.Mutex
	readers map[uuid.UUID]*reader
	ctx     context.Context // nil when not running
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// relayReadTimeout bounds one read of a reader.
const relayReadTimeout = 10 * time.Second

// reader is one run's reader. It waits for its first follower to have read
// the log (seed) before it reads anything: its wake-up subscription,
// taken before that follower's read, covers every commit since.
type reader struct {
	rl     *relay
	run    *Run
	caller string // the run's thread's, as its first follower was checked
	wake   Wake
	refs   int // followers subscribed
	seeded bool
	gone   bool // out of the relay: its goroutine, if any, stops
	cancel context.CancelFunc

	// Only its goroutine touches these once it is seeded.
	pos  int64 // the last sequence published
	tree *checkpoint.Tree
}

func newRelay(s *Service, buf int) *relay {
	return &relay{s: s, hub: stream.New[Event](buf), readers: make(map[uuid.UUID]*reader)}
}

// Start lets followers subscribe. A relay stopped may be started again.
func (rl *relay) Start() {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.ctx == nil {
		rl.ctx, rl.cancel = context.WithCancel(context.Background())
	}
}

// Stop stops every reader and waits for them, and closes every
// subscription (their followers go back to the log). Subscribing then
// returns nil until Start.
func (rl *relay) Stop() {
	rl.mu.Lock()
	cancel := rl.cancel
	rl.ctx, rl.cancel = nil, nil
	for _, rd := range rl.readers {
		rl.dropLocked(rd)
	}
	rl.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	rl.wg.Wait()
}

// readerCount is how many runs have a reader (seeded or not).
func (rl *relay) readerCount() int {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return len(rl.readers)
}

// subscribe subscribes a follower of r, whose caller was checked, to the
// events r's reader publishes, or returns nil if the relay is stopped. The
// follower then reads the log and seeds the subscription with where it
// stands.
func (rl *relay) subscribe(r *Run, caller string) *relaySub {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.ctx == nil {
		return nil
	}
	rd := rl.readers[r.ID]
	if rd == nil {
		rd = &reader{rl: rl, run: r, caller: caller, wake: rl.s.cfg.Wakeups.WakeRun(r.ID)}
		rl.readers[r.ID] = rd
	}
	rd.refs++
	return &relaySub{Subscription: rl.hub.Subscribe(r.ID), rd: rd}
}

// dropLocked takes rd out of the relay, stops its goroutine and closes its
// run's subscriptions. rl.mu is held.
func (rl *relay) dropLocked(rd *reader) {
	if rd.gone {
		return
	}
	rd.gone = true
	delete(rl.readers, rd.run.ID)
	rd.wake.Close()
	if rd.cancel != nil {
		rd.cancel()
	}
	rl.hub.End(rd.run.ID)
}

// relaySub is a follower's subscription to its run's reader.
type relaySub struct {
	stream.Subscription[Event]
	rd   *reader
	once sync.Once
}

// seed starts the reader, reading after sequence last (what the follower
// read from the log), unless it runs already.
func (rs *relaySub) seed(last int64) {
	rd, rl := rs.rd, rs.rd.rl
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rd.seeded || rd.gone || rl.ctx == nil {
		return
	}
	ctx, cancel := context.WithCancel(rl.ctx)
	rd.seeded, rd.pos, rd.cancel = true, last, cancel
	rl.wg.Add(1)
	go func() {
		defer rl.wg.Done()
		rd.loop(ctx)
	}()
}

// Close ends the subscription; the reader stops with its last follower.
func (rs *relaySub) Close() {
	rs.Subscription.Close()
	rs.once.Do(func() {
		rl := rs.rd.rl
		rl.mu.Lock()
		defer rl.mu.Unlock()
		rs.rd.refs--
		if rs.rd.refs == 0 {
			rl.dropLocked(rs.rd)
		}
	})
}

// loop reads on every wake-up, and after a quiet spell, until ctx ends or
// the run ended; a failed read is tried again with backoff.
func (rd *reader) loop(ctx context.Context) {
	s := rd.rl.s
	poll := s.pollEvery()
	t := time.NewTimer(poll)
	defer t.Stop()
	var backoff time.Duration
	for {
		select {
		case <-ctx.Done():
			return
		case <-rd.wake.C():
		case <-t.C:
		}
		ended, err := rd.read(ctx)
		if errcode.Of(err) == errcode.NotFound {
			ended, err = true, nil // the run or its thread was deleted
		}
		if ended {
			rd.rl.end(rd)
			return
		}
		next := poll
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, s.cfg.RetryMin), poll)
			next = backoff
			s.log.Debug("relay read", "run", rd.run.ID, "err", err)
		} else {
			backoff = 0
		}
		t.Reset(next)
	}
}

// read publishes what the run logged after the reader's position and
// reports whether the run ended. Errors are the store's (not_found: the
// run or its thread is gone).
func (rd *reader) read(ctx context.Context) (bool, error) {
	s := rd.rl.s
	// Its followers wait on it alone: a read that hangs (a connection
	// gone silent) is given up and tried again.
	ctx, cancel := context.WithTimeout(ctx, relayReadTimeout)
	defer cancel()
	recs, _, err := s.logged(ctx, rd.run.ID, rd.pos)
	if err != nil {
		return false, err
	}
	ended := false
	if len(recs) == 0 {
		// A wake-up for nothing new, or a quiet spell: did the run end?
		if recs, ended, _, err = s.storedTail(ctx, rd.run, rd.pos); err != nil || len(recs) == 0 {
			return ended, err
		}
	}
	evs, tree, err := s.events(ctx, rd.caller, rd.run, recs, rd.tree)
	if err != nil {
		return false, err
	}
	rd.tree, rd.pos = tree, recs[len(recs)-1].Seq
	rd.rl.hub.Publish(rd.run.ID, evs...)
	return ended || evs[len(evs)-1].Final(), nil
}

// end takes a reader whose run ended out of the relay; its followers have
// the final event, or read the log for what ended it.
func (rl *relay) end(rd *reader) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.dropLocked(rd)
}
