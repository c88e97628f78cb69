// Package batch writes requests that arrive together in one store write:
// Batcher, a component with one goroutine it owns (Start, Stop). The engine
// batches runs' starts and ends with it.
package batch

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/threadline/threadline/thread/engine/internal/lifecycle"
)

// Batcher writes what arrives while one of its writes is in flight
// together: every request pending when a write begins goes into that
// write, one round trip and one commit for all of them (all). A burst of
// run starts or run ends then keeps one connection busy instead of a
// pool's worth, each with its own commit, and a lone request is written at
// once (one). A write of several is all or nothing, so when it is refused
// each request is written again alone and gets its own answer.
type Batcher[T any] struct {
	mu      sync.Mutex
	pending []batchReq[T]
	kick    chan struct{}
	all     func(context.Context, []T) error
	one     func(context.Context, T) error
	// unknown says whether a failed write of several may have committed
	// all the same (a want of the database, not a refusal).
	unknown func(error) bool
	max     int // the most requests in one write
	life    lifecycle.Lifecycle
	// open says the goroutine takes requests: Write refuses them when not.
	open bool
}

// MaybeWritten is a Batcher's answer for a request whose write alone
// failed after the write of its whole batch failed for want of the
// database: that write may have committed it all the same. It wraps the
// answer of the write alone.
type MaybeWritten struct{ err error }

func (e *MaybeWritten) Error() string { return e.err.Error() }
func (e *MaybeWritten) Unwrap() error { return e.err }

// ErrBatcherStopped answers a write to a Batcher that is not running.
var ErrBatcherStopped = errors.New("the service's writer is stopped")

// batchMax bounds one write: a burst of thousands of ends is written as
// several transactions of this many, so that none grows without bound and
// a refused one is retried alone for at most this many requests.
const batchMax = 256

type batchReq[T any] struct {
	item T
	done chan error
}

// NewBatcher returns a Batcher that writes several requests with all and
// one alone with one; unknown says whether an error of all may hide a
// commit (the requests refused alone then are answered MaybeWritten).
func NewBatcher[T any](all func(context.Context, []T) error, one func(context.Context, T) error, unknown func(error) bool) *Batcher[T] {
	return &Batcher[T]{kick: make(chan struct{}, 1), all: all, one: one, unknown: unknown, max: batchMax}
}

// Start starts the batcher's goroutine.
func (b *Batcher[T]) Start() {
	b.mu.Lock()
	b.open = true
	b.mu.Unlock()
	b.life.Start(b.loop)
}

// Stop stops the goroutine after the write in flight; requests that wait
// for a later write are answered ErrBatcherStopped, and so are later ones.
func (b *Batcher[T]) Stop() { b.life.Stop() }

// Write writes item, with whatever else is pending, and returns the
// store's answer for it: the error of its write, MaybeWritten wrapping
// it, or ErrBatcherStopped when the Batcher is not running.
func (b *Batcher[T]) Write(item T) error {
	req := batchReq[T]{item: item, done: make(chan error, 1)}
	b.mu.Lock()
	if !b.open {
		b.mu.Unlock()
		return ErrBatcherStopped
	}
	b.pending = append(b.pending, req)
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default:
	}
	return <-req.done
}

// Waiting is how many requests wait for the next write.
func (b *Batcher[T]) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

func (b *Batcher[T]) loop(stop <-chan struct{}) {
	defer func() {
		b.mu.Lock()
		b.open = false
		rest := b.pending
		b.pending = nil
		b.mu.Unlock()
		for _, r := range rest {
			r.done <- ErrBatcherStopped
		}
	}()
	for {
		select {
		case <-stop:
			return
		case <-b.kick:
		}
		select {
		case <-stop: // a stop wins over a write that waits
			return
		default:
		}
		b.mu.Lock()
		batch := b.pending
		b.pending = nil
		if len(batch) > b.max {
			// The rest waits for the next write, which this one kicks.
			b.pending = append([]batchReq[T](nil), batch[b.max:]...)
			batch = batch[:b.max]
			select {
			case b.kick <- struct{}{}:
			default:
			}
		}
		b.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if len(batch) > 1 {
			items := make([]T, len(batch))
			for i, r := range batch {
				items[i] = r.item
			}
			err := b.all(ctx, items)
			if err == nil {
				for _, r := range batch {
					r.done <- nil
				}
				cancel()
				continue
			}
			// A write that failed for want of the database may have
			// committed: a refusal of the same request alone may be its
			// own earlier write's doing.
			unknown := b.unknown(err)
			for _, r := range batch {
				err := b.one(ctx, r.item)
				if err != nil && unknown {
					err = &MaybeWritten{err: err}
				}
				r.done <- err
			}
			cancel()
			continue
		}
		for _, r := range batch {
			r.done <- b.one(ctx, r.item)
		}
		cancel()
	}
}
