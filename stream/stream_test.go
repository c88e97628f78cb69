package stream_test

import (
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/threadline/threadline/stream"
)

func drain(s stream.Subscription[int]) []int {
	var out []int
	for b := range s.C() {
		out = append(out, b...)
	}
	return out
}

// TestHub: batches arrive whole and in order, a full subscriber is dropped
// with Lagged while the others go on, and End closes what is left.
func TestHub(t *testing.T) {
	t.Parallel()
	h := stream.New[int](2)
	key, other := uuid.New(), uuid.New()
	slow, fast, elsewhere := h.Subscribe(key), h.Subscribe(key), h.Subscribe(other)
	h.Publish(key, 1, 2, 3)
	h.Publish(key) // an empty batch is not sent
	h.Publish(key, 4)
	if b := <-fast.C(); fmt.Sprint(b) != "[1 2 3]" {
		t.Fatalf("first batch: got %v, want [1 2 3]", b)
	}
	h.Publish(key, 5) // slow has two batches waiting: it is dropped
	h.End(key)
	if got := drain(slow); fmt.Sprint(got) != "[1 2 3 4]" || !slow.Lagged() {
		t.Fatalf("slow subscriber: got %v lagged %v, want [1 2 3 4] and lagged", got, slow.Lagged())
	}
	if got := drain(fast); fmt.Sprint(got) != "[4 5]" || fast.Lagged() {
		t.Fatalf("fast subscriber: got %v lagged %v, want [4 5], not lagged", got, fast.Lagged())
	}
	if n := h.Subscribers(other); n != 1 {
		t.Fatalf("subscribers of another key: got %d, want 1", n)
	}
	elsewhere.Close()
	elsewhere.Close() // twice is fine
	if got := drain(elsewhere); len(got) != 0 || h.Subscribers(other) != 0 {
		t.Fatalf("closed subscription: got %v and %d subscribers", got, h.Subscribers(other))
	}
}
