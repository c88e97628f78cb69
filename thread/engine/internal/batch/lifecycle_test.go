package batch

import (
	"context"
	"errors"
	"testing"
)

// TestBatcherStartStop: a started batcher writes; Stop waits for the
// write in flight, closes Stopped, and later writes are refused with
// ErrBatcherStopped instead of waiting forever; Start makes it write again.
func TestBatcherStartStop(t *testing.T) {
	t.Parallel()
	entered, hold := make(chan struct{}), make(chan struct{})
	b := NewBatcher(func(context.Context, []int) error { return nil }, func(_ context.Context, x int) error {
		if x == 1 {
			close(entered)
			<-hold
		}
		return nil
	}, unavailable)
	b.Start()
	<-b.life.Started()
	first := make(chan error, 1)
	go func() { first <- b.Write(1) }()
	<-entered
	stopped := make(chan struct{})
	go func() { b.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a write was in flight")
	case err := <-first:
		t.Fatalf("held write answered early: %v", err)
	default:
	}
	close(hold)
	<-stopped
	<-b.life.Stopped()
	if err := <-first; err != nil {
		t.Fatalf("write in flight at Stop: got %v, want nil", err)
	}
	if err := b.Write(2); !errors.Is(err, ErrBatcherStopped) {
		t.Fatalf("write after Stop: got %v, want ErrBatcherStopped", err)
	}
	b.Start()
	if err := b.Write(3); err != nil {
		t.Fatalf("write after Start again: got %v, want nil", err)
	}
	b.Stop()
}
