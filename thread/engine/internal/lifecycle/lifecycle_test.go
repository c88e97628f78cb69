package lifecycle_test

import (
	"testing"
	"time"

	"github.com/threadline/threadline/thread/engine/internal/lifecycle"
)

// TestContext: the context ends when stop closes, or when it is cancelled
// (stop never closing then).
func TestContext(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	ctx, cancel := lifecycle.Context(stop)
	defer cancel()
	select {
	case <-ctx.Done():
		t.Fatal("the context ended before stop closed")
	default:
	}
	close(stop)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the context did not end 10 s after stop closed")
	}

	ctx2, cancel2 := lifecycle.Context(make(chan struct{}))
	cancel2()
	if ctx2.Err() == nil {
		t.Fatal("cancel: got a live context, want it ended")
	}
}

// TestLoopOwnsContext: a loop run by a Lifecycle with a Context returns on
// Stop, and Stop waits for it.
func TestLoopOwnsContext(t *testing.T) {
	t.Parallel()
	var l lifecycle.Lifecycle
	returned := make(chan struct{})
	l.Start(func(stop <-chan struct{}) {
		ctx, cancel := lifecycle.Context(stop)
		defer cancel()
		<-ctx.Done()
		close(returned)
	})
	<-l.Started()
	l.Stop()
	select {
	case <-returned:
	default:
		t.Fatal("Stop returned before the loop did")
	}
	if l.Running() {
		t.Fatal("Running after Stop: got true, want false")
	}
}
