package builtin

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"
)

// paceQuantum is how often at most the pacer wakes. Its goroutine sleeps
// until the next due token, but never less than this after its last wake,
// so with a thousand paced streams it wakes a thousand times a second
// instead of once per token; a token is at most this late.
const paceQuantum = time.Millisecond

// A Pacer sends the tokens of every paced built-in stream from one
// goroutine with one timer. With a ticker per stream, each token cost a
// timer and a goroutine wake of its own, and a stream whose goroutine was
// kept waiting by a busy process dropped ticks and fell behind its
// schedule for good. Here token i is due at start + (i+1)*Delay whatever
// happened before it: a late stream catches up at once, as a provider's
// stream buffered in a socket would.
//
// Its goroutine is owned: Start starts it (the first stream does, if
// nobody did), Stop stops it and ends every stream on it with
// ErrPacerStopped, as do streams paced after it until the next Start.
// Started and Stopped are closed when those happen.
type Pacer struct {
	mu      sync.Mutex
	q       pacedQueue
	wake    chan struct{} // a stream was queued ahead of the pacer's sleep
	stop    chan struct{} // nil while the goroutine does not run
	stopped chan struct{}
	started chan struct{}
	halted  bool // Stop was called and Start not since
}

// ErrPacerStopped ends a stream whose pacer was stopped.
var ErrPacerStopped = errors.New("model: the pacer was stopped")

// NewPacer returns a pacer whose goroutine is not started yet.
func NewPacer() *Pacer {
	return &Pacer{wake: make(chan struct{}, 1), started: make(chan struct{}), stopped: make(chan struct{})}
}

// paceInline sends tokens as pace does, token i at start + (i+1)*every,
// but from the caller's goroutine with a timer of its own: the path of a
// built-in model given no Pacer, so that no goroutine runs without an
// owner. It returns send's error or ctx.Err().
func paceInline(ctx context.Context, n int, every time.Duration, send func(i int) error) error {
	start := time.Now()
	t := time.NewTimer(every)
	defer t.Stop()
	for i := 0; i < n; i++ {
		if wait := time.Until(start.Add(time.Duration(i+1) * every)); wait > 0 {
			t.Reset(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		} else if err := ctx.Err(); err != nil {
			return err
		}
		if err := send(i); err != nil {
			return err
		}
	}
	return nil
}

// paceWith paces through pc, or inline when pc is nil.
func paceWith(ctx context.Context, pc *Pacer, n int, every time.Duration, send func(i int) error) error {
	if pc == nil {
		return paceInline(ctx, n, every, send)
	}
	return pc.pace(ctx, n, every, send)
}

// Start starts the pacer's goroutine; it does nothing while it runs.
func (pc *Pacer) Start() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.halted = false
	pc.startLocked()
}

func (pc *Pacer) startLocked() {
	if pc.stop != nil {
		return
	}
	select {
	case <-pc.started: // started and stopped before: new signals
		pc.started, pc.stopped = make(chan struct{}), make(chan struct{})
	default:
	}
	pc.stop = make(chan struct{})
	stop, stopped := pc.stop, pc.stopped
	close(pc.started)
	go func() {
		defer close(stopped)
		pc.loop(stop)
	}()
}

// Stop stops the goroutine, waits for it, and ends every stream on the
// pacer with ErrPacerStopped.
func (pc *Pacer) Stop() {
	pc.mu.Lock()
	stop, stopped := pc.stop, pc.stopped
	pc.stop, pc.halted = nil, true
	pc.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-stopped
	pc.mu.Lock()
	q := pc.q
	pc.q = nil
	pc.mu.Unlock()
	for _, p := range q {
		p.mu.Lock()
		if !p.stopped {
			p.stopped, p.err = true, ErrPacerStopped
			close(p.done)
		}
		p.mu.Unlock()
	}
}

// Started is closed once the goroutine runs.
func (pc *Pacer) Started() <-chan struct{} {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.started
}

// Stopped is closed once the goroutine has returned after Stop.
func (pc *Pacer) Stopped() <-chan struct{} {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.stopped
}

// paced is one stream on the pacer. mu is held while a token is sent, so
// that once its owner has set stopped under mu no token follows.
type paced struct {
	mu      sync.Mutex
	ctx     context.Context
	next    int       // index of the next token
	n       int       // tokens in all
	at      time.Time // when token next is due
	every   time.Duration
	send    func(i int) error
	stopped bool
	err     error
	done    chan struct{} // closed when every token was sent or sending failed
}

// pace sends tokens 0..n-1 through send, token i at start + (i+1)*every,
// from the pacer goroutine. It returns when all are sent, when send fails
// (with its error) or when ctx ends (with ctx.Err()); no send runs after it
// returns. send must not block: it runs on the goroutine every paced
// stream shares.
func (pc *Pacer) pace(ctx context.Context, n int, every time.Duration, send func(i int) error) error {
	if n == 0 {
		return nil
	}
	p := &paced{ctx: ctx, n: n, at: time.Now().Add(every), every: every, send: send, done: make(chan struct{})}
	if !pc.queue(p) {
		return ErrPacerStopped
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.mu.Lock()
		if !p.stopped {
			p.stopped, p.err = true, ctx.Err()
		}
		p.mu.Unlock()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// queue adds p, starting the goroutine if nobody did; it reports false
// when the pacer was stopped.
func (pc *Pacer) queue(p *paced) bool {
	pc.mu.Lock()
	if pc.halted {
		pc.mu.Unlock()
		return false
	}
	pc.startLocked()
	heap.Push(&pc.q, p)
	first := pc.q[0] == p
	pc.mu.Unlock()
	if first {
		select {
		case pc.wake <- struct{}{}:
		default:
		}
	}
	return true
}

func (pc *Pacer) loop(stop <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var due []*paced
	for {
		now := time.Now()
		pc.mu.Lock()
		for len(pc.q) > 0 && !pc.q[0].at.After(now) {
			due = append(due, heap.Pop(&pc.q).(*paced))
		}
		pc.mu.Unlock()
		for i, p := range due {
			if p.step(now) {
				pc.mu.Lock()
				heap.Push(&pc.q, p)
				pc.mu.Unlock()
			}
			due[i] = nil
		}
		due = due[:0]
		pc.mu.Lock()
		empty := len(pc.q) == 0
		var wait time.Duration
		if !empty {
			wait = max(pc.q[0].at.Sub(now), paceQuantum-time.Since(now), 0)
		}
		pc.mu.Unlock()
		if empty {
			select {
			case <-pc.wake:
			case <-stop:
				return
			}
			continue
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-pc.wake:
			// Go 1.23+ timers: no stale tick is left to drain after Stop.
			timer.Stop()
		case <-stop:
			return
		}
	}
}

// step sends every token of p due by now and reports whether p has more.
func (p *paced) step(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.stopped && !p.at.After(now) {
		if err := p.ctx.Err(); err != nil {
			p.stopped, p.err = true, err
			break
		}
		if err := p.send(p.next); err != nil {
			p.stopped, p.err = true, err
			break
		}
		p.next++
		p.at = p.at.Add(p.every)
		if p.next == p.n {
			p.stopped = true
		}
	}
	if p.stopped {
		select {
		case <-p.done:
		default:
			close(p.done)
		}
		return false
	}
	return true
}

// pacedQueue is a min-heap of streams by due time.
type pacedQueue []*paced

func (q pacedQueue) Len() int           { return len(q) }
func (q pacedQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q pacedQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *pacedQueue) Push(x any)        { *q = append(*q, x.(*paced)) }
func (q *pacedQueue) Pop() any {
	old := *q
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return p
}
