// Package relay brings the runs that other processes own to this
// process's followers with one reader per run (Relay), woken by the
// run's wake-ups and polling only as a safety net.
package relay

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/stream"
)

// Wake is a subscription to one run's wake-ups: its channel fires
// whenever the run's log may have grown (wake-ups coalesce).
type Wake interface {
	C() <-chan struct{}
	Close()
}

// RelayRead reads what a run logged after sequence after: its events in
// order, the sequence of the last record read, and whether the run ended.
// No events and no error is a wake-up for nothing new. A not_found error
// says the run or its thread is gone; other errors are tried again.
type RelayRead[E any] func(ctx context.Context, after int64) (evs []E, last int64, ended bool, err error)

// Relay brings the runs that other processes own to this process's
// followers with one reader per run, however many follow it. On a wake-up
// for run R (another process committed to R's log), R's reader reads the
// new records once from the durable log and publishes them on the relay's
// hub, to which every local follower of R subscribes. The log stays the
// source of truth: a follower reads it before it takes live events and
// again after any gap, and a follower that falls behind is dropped by the
// hub (the reader never waits for it) and rejoins from its sequence. A
// reader also reads after a quiet spell without wake-ups (the safety net),
// and stops when its last follower leaves or its run ended or is gone.
// It is used only with wake-ups.
type Relay[E any] struct {
	hub      *stream.Hub[E]
	wake     func(runID uuid.UUID) Wake
	poll     time.Duration
	retryMin time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	readers map[uuid.UUID]*relayReader[E]
	ctx     context.Context // nil when not running
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// relayReadTimeout bounds one read of a reader.
const relayReadTimeout = 10 * time.Second

// relayReader is one run's reader. It waits for its first follower to
// have read the log (Seed) before it reads anything: its wake-up
// subscription, taken before that follower's read, covers every commit
// since.
type relayReader[E any] struct {
	rl     *Relay[E]
	id     uuid.UUID
	read   RelayRead[E] // its first follower's
	wake   Wake
	refs   int // followers subscribed
	seeded bool
	gone   bool // out of the relay: its goroutine, if any, stops
	cancel context.CancelFunc

	// Only its goroutine touches pos once it is seeded.
	pos int64 // the last sequence published
}

// NewRelay returns a stopped relay whose hub keeps buf events per
// follower, whose readers subscribe to wake-ups with wake, read again
// after poll without one, and wait from retryMin up to poll after a failed
// read, logging it to log.
func NewRelay[E any](buf int, wake func(runID uuid.UUID) Wake, poll, retryMin time.Duration, log *slog.Logger) *Relay[E] {
	return &Relay[E]{hub: stream.New[E](buf), wake: wake, poll: poll, retryMin: retryMin, log: log,
		readers: make(map[uuid.UUID]*relayReader[E])}
}

// Start lets followers subscribe. A relay stopped may be started again.
func (rl *Relay[E]) Start() {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.ctx == nil {
		rl.ctx, rl.cancel = context.WithCancel(context.Background())
	}
}

// Stop stops every reader and waits for them, and closes every
// subscription (their followers go back to the log). Subscribe then
// returns nil until Start.
func (rl *Relay[E]) Stop() {
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

// Readers is how many runs have a reader (seeded or not).
func (rl *Relay[E]) Readers() int {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return len(rl.readers)
}

// Subscribe subscribes a follower of run runID to the events its reader
// publishes, or returns nil if the relay is stopped. A run without a
// reader gets one that reads with read (a later follower's read is not
// used). The follower then reads the log and seeds the subscription with
// where it stands.
func (rl *Relay[E]) Subscribe(runID uuid.UUID, read RelayRead[E]) *RelaySub[E] {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.ctx == nil {
		return nil
	}
	rd := rl.readers[runID]
	if rd == nil {
		rd = &relayReader[E]{rl: rl, id: runID, read: read, wake: rl.wake(runID)}
		rl.readers[runID] = rd
	}
	rd.refs++
	return &RelaySub[E]{Subscription: rl.hub.Subscribe(runID), rd: rd}
}

// dropLocked takes rd out of the relay, stops its goroutine and closes its
// run's subscriptions. rl.mu is held.
func (rl *Relay[E]) dropLocked(rd *relayReader[E]) {
	if rd.gone {
		return
	}
	rd.gone = true
	delete(rl.readers, rd.id)
	rd.wake.Close()
	if rd.cancel != nil {
		rd.cancel()
	}
	rl.hub.End(rd.id)
}

// RelaySub is a follower's subscription to its run's reader.
type RelaySub[E any] struct {
	stream.Subscription[E]
	rd   *relayReader[E]
	once sync.Once
}

// Seed starts the reader, reading after sequence last (what the follower
// read from the log), unless it runs already.
func (rs *RelaySub[E]) Seed(last int64) {
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
func (rs *RelaySub[E]) Close() {
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
func (rd *relayReader[E]) loop(ctx context.Context) {
	rl := rd.rl
	t := time.NewTimer(rl.poll)
	defer t.Stop()
	var backoff time.Duration
	for {
		select {
		case <-ctx.Done():
			return
		case <-rd.wake.C():
		case <-t.C:
		}
		ended, err := rd.step(ctx)
		if errcode.Of(err) == errcode.NotFound {
			ended, err = true, nil // the run or its thread was deleted
		}
		if ended {
			rl.end(rd)
			return
		}
		next := rl.poll
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, rl.retryMin), rl.poll)
			next = backoff
			rl.log.Debug("relay read", "run", rd.id, "err", err)
		} else {
			backoff = 0
		}
		t.Reset(next)
	}
}

// step publishes what the run logged after the reader's position and
// reports whether the run ended. Errors are the read's (not_found: the
// run or its thread is gone).
func (rd *relayReader[E]) step(ctx context.Context) (bool, error) {
	// Its followers wait on it alone: a read that hangs (a connection
	// gone silent) is given up and tried again.
	ctx, cancel := context.WithTimeout(ctx, relayReadTimeout)
	defer cancel()
	evs, last, ended, err := rd.read(ctx, rd.pos)
	if err != nil || len(evs) == 0 {
		return ended, err
	}
	rd.pos = last
	rd.rl.hub.Publish(rd.id, evs...)
	return ended, nil
}

// end takes a reader whose run ended out of the relay; its followers have
// the final event, or read the log for what ended it.
func (rl *Relay[E]) end(rd *relayReader[E]) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.dropLocked(rd)
}
