package model

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// paceQuantum is how often at most the pacer wakes. Its goroutine sleeps
// until the next due token, but never less than this after its last wake,
// so with a thousand paced streams it wakes a thousand times a second
// instead of once per token; a token is at most this late.
const paceQuantum = time.Millisecond

// The pacer sends the tokens of every paced built-in stream in the process
// from one goroutine with one timer. With a ticker per stream, each token
// cost a timer and a goroutine wake of its own, and a stream whose
// goroutine was kept waiting by a busy process dropped ticks and fell
// behind its schedule for good. Here token i is due at start + (i+1)*Delay
// whatever happened before it: a late stream catches up at once, as a
// provider's stream buffered in a socket would.
var pacer = struct {
	once sync.Once
	mu   sync.Mutex
	q    pacedQueue
	wake chan struct{} // a stream was queued ahead of the pacer's sleep
}{wake: make(chan struct{}, 1)}

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
func pace(ctx context.Context, n int, every time.Duration, send func(i int) error) error {
	if n == 0 {
		return nil
	}
	pacer.once.Do(func() { go paceLoop() })
	p := &paced{ctx: ctx, n: n, at: time.Now().Add(every), every: every, send: send, done: make(chan struct{})}
	paceQueue(p)
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

func paceQueue(p *paced) {
	pacer.mu.Lock()
	heap.Push(&pacer.q, p)
	first := pacer.q[0] == p
	pacer.mu.Unlock()
	if first {
		select {
		case pacer.wake <- struct{}{}:
		default:
		}
	}
}

func paceLoop() {
	timer := time.NewTimer(time.Hour)
	var due []*paced
	for {
		now := time.Now()
		pacer.mu.Lock()
		for len(pacer.q) > 0 && !pacer.q[0].at.After(now) {
			due = append(due, heap.Pop(&pacer.q).(*paced))
		}
		pacer.mu.Unlock()
		for i, p := range due {
			if p.step(now) {
				pacer.mu.Lock()
				heap.Push(&pacer.q, p)
				pacer.mu.Unlock()
			}
			due[i] = nil
		}
		due = due[:0]
		pacer.mu.Lock()
		empty := len(pacer.q) == 0
		var wait time.Duration
		if !empty {
			wait = max(pacer.q[0].at.Sub(now), paceQuantum-time.Since(now), 0)
		}
		pacer.mu.Unlock()
		if empty {
			<-pacer.wake
			continue
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-pacer.wake:
			// Go 1.23+ timers: no stale tick is left to drain after Stop.
			timer.Stop()
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
