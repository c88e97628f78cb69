package thread

import (
	"context"
	"errors"
	"sync"
	"time"
)

// batcher writes what arrives while one of its writes is in flight
// together: every request pending when a write begins goes into that
// write, one round trip and one commit for all of them (all). A burst of
// run starts or run ends then keeps one connection busy instead of a
// pool's worth, each with its own commit, and a lone request is written at
// once (one). A write of several is all or nothing, so when it is refused
// each request is written again alone and gets its own answer.
type batcher[T any] struct {
	mu      sync.Mutex
	pending []batchReq[T]
	kick    chan struct{}
	all     func(context.Context, []T) error
	one     func(context.Context, T) error
	max     int // the most requests in one write
	life    lifecycle
	// open says the goroutine takes requests: write refuses them when not.
	open bool
}

// maybeWritten is a batcher's answer for a request whose write alone
// failed after the write of its whole batch failed for want of the
// database: that write may have committed it all the same. It wraps the
// answer of the write alone.
type maybeWritten struct{ err error }

func (e *maybeWritten) Error() string { return e.err.Error() }
func (e *maybeWritten) Unwrap() error { return e.err }

// errBatcherStopped answers a write to a batcher that is not running.
var errBatcherStopped = errors.New("the service's writer is stopped")

// batchMax bounds one write: a burst of thousands of ends is written as
// several transactions of this many, so that none grows without bound and
// a refused one is retried alone for at most this many requests.
const batchMax = 256

type batchReq[T any] struct {
	item T
	done chan error
}

func newBatcher[T any](all func(context.Context, []T) error, one func(context.Context, T) error) *batcher[T] {
	return &batcher[T]{kick: make(chan struct{}, 1), all: all, one: one, max: batchMax}
}

// Start starts the batcher's goroutine.
func (b *batcher[T]) Start() {
	b.mu.Lock()
	b.open = true
	b.mu.Unlock()
	b.life.start(b.loop)
}

// Stop stops the goroutine after the write in flight; requests that wait
// for a later write are answered errBatcherStopped, and so are later ones.
func (b *batcher[T]) Stop() { b.life.stop() }

// write writes item, with whatever else is pending, and returns the
// store's answer for it.
func (b *batcher[T]) write(item T) error {
	req := batchReq[T]{item: item, done: make(chan error, 1)}
	b.mu.Lock()
	if !b.open {
		b.mu.Unlock()
		return errBatcherStopped
	}
	b.pending = append(b.pending, req)
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default:
	}
	return <-req.done
}

// waiting is how many requests wait for the next write.
func (b *batcher[T]) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

func (b *batcher[T]) loop(stop <-chan struct{}) {
	defer func() {
		b.mu.Lock()
		b.open = false
		rest := b.pending
		b.pending = nil
		b.mu.Unlock()
		for _, r := range rest {
			r.done <- errBatcherStopped
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
			unknown := retryable(err)
			for _, r := range batch {
				err := b.one(ctx, r.item)
				if err != nil && unknown {
					err = &maybeWritten{err: err}
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

// startReq is a run's start for the starts batcher.
type startReq struct {
	in    RunCreate
	first Record
}

// newStarts batches the starts of runs whose linger ran out
// (Store.RunCreateAll).
func newStarts(st Store) *batcher[startReq] {
	return newBatcher(func(ctx context.Context, rs []startReq) error {
		ins, firsts := make([]RunCreate, len(rs)), make([]Record, len(rs))
		for i, r := range rs {
			ins[i], firsts[i] = r.in, r.first
		}
		return st.RunCreateAll(ctx, ins, firsts)
	}, func(ctx context.Context, r startReq) error {
		_, err := st.RunCreate(ctx, r.in, r.first)
		return err
	})
}

// newEnds batches the ends of runs whose start was written alone
// (Store.RunFinishAll): the runs that started together in a burst end
// together too.
func newEnds(st Store) *batcher[RunFinish] {
	return newBatcher(func(ctx context.Context, ins []RunFinish) error {
		return st.RunFinishAll(ctx, ins)
	}, func(ctx context.Context, in RunFinish) error {
		return st.RunFinish(ctx, in)
	})
}
