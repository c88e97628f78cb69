// Package stream owns the in-memory fan-out of run events to live
// subscribers. It holds no history: the durable log is the store's. A
// publisher never waits for a subscriber; a subscriber whose buffer is full
// is dropped and told so (Lagged), and catches up from the log. Events
// travel in the batches they were published in (one group commit's, or a
// whole short run's), one channel send per batch and subscriber.
package stream

import (
	"sync"

	"github.com/google/uuid"
)

// Subscription receives one run's events, in published batches that it
// must not modify. C closes when the run ends (End), when the subscriber
// fell behind (Lagged reports true), or after Close.
type Subscription[E any] interface {
	C() <-chan []E
	Close()
	Lagged() bool
}

// Hub is a set of per-key topics. The zero value is not usable; use New.
type Hub[E any] struct {
	buf    int
	mu     sync.Mutex
	topics map[uuid.UUID]map[*sub[E]]struct{}
}

// New returns a hub whose subscriptions buffer up to buf batches.
func New[E any](buf int) *Hub[E] {
	if buf < 1 {
		buf = 1
	}
	return &Hub[E]{buf: buf, topics: make(map[uuid.UUID]map[*sub[E]]struct{})}
}

type sub[E any] struct {
	hub    *Hub[E]
	key    uuid.UUID
	ch     chan []E
	lagged bool
	closed bool
}

func (s *sub[E]) C() <-chan []E { return s.ch }

// Lagged reports whether the subscription was dropped for falling behind.
// It is meaningful once C is closed.
func (s *sub[E]) Lagged() bool {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.lagged
}

// Close ends the subscription; it is safe to call more than once.
func (s *sub[E]) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.hub.removeLocked(s)
}

// removeLocked detaches s and closes its channel. Sends happen only under
// the same lock, so nothing is ever sent on a closed channel.
func (h *Hub[E]) removeLocked(s *sub[E]) {
	if s.closed {
		return
	}
	s.closed = true
	close(s.ch)
	if t := h.topics[s.key]; t != nil {
		delete(t, s)
		if len(t) == 0 {
			delete(h.topics, s.key)
		}
	}
}

// Subscribe starts receiving the events published for key from now on.
func (h *Hub[E]) Subscribe(key uuid.UUID) Subscription[E] {
	s := &sub[E]{hub: h, key: key, ch: make(chan []E, h.buf)}
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[key]
	if t == nil {
		t = make(map[*sub[E]]struct{})
		h.topics[key] = t
	}
	t[s] = struct{}{}
	return s
}

// Publish delivers events, as one batch, to every subscriber of key without
// blocking: a subscriber with no room left is dropped with Lagged set. The
// batch is shared, so the caller must not modify events afterwards.
func (h *Hub[E]) Publish(key uuid.UUID, events ...E) {
	if len(events) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.topics[key] {
		select {
		case s.ch <- events:
		default:
			s.lagged = true
			h.removeLocked(s)
		}
	}
}

// End closes every subscription of key; their C channels drain and close.
func (h *Hub[E]) End(key uuid.UUID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.topics[key] {
		h.removeLocked(s)
	}
}

// Subscribers returns how many subscriptions key has.
func (h *Hub[E]) Subscribers(key uuid.UUID) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.topics[key])
}
