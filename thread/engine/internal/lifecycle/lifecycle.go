// Package lifecycle holds Lifecycle, the owner of a background goroutine.
package lifecycle

import (
	"context"
	"sync"
)

// Lifecycle owns one background goroutine, after River's internal
// services: Start runs it once (a second Start while it runs does
// nothing), Stop closes its stop channel and waits for it to return, and
// Started and Stopped are closed when those happen, for tests to wait on.
// A stopped Lifecycle may be started again. The zero value is ready.
type Lifecycle struct {
	mu      sync.Mutex
	stopCh  chan struct{}
	started chan struct{}
	stopped chan struct{}
}

// Start runs loop on a goroutine of its own until stop. It reports whether
// it started it (false: it runs already).
func (l *Lifecycle) Start(loop func(stop <-chan struct{})) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopCh != nil {
		return false
	}
	l.stopCh, l.stopped = make(chan struct{}), make(chan struct{})
	if l.started == nil {
		l.started = make(chan struct{})
	}
	stop, stopped, started := l.stopCh, l.stopped, l.started
	go func() {
		defer close(stopped)
		close(started)
		loop(stop)
	}()
	return true
}

// Stop asks the goroutine to return and waits until it has; it does
// nothing if it does not run.
func (l *Lifecycle) Stop() {
	l.mu.Lock()
	stop, stopped := l.stopCh, l.stopped
	l.stopCh, l.started = nil, nil
	l.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-stopped
}

// Running reports whether the goroutine runs (started and not stopped).
func (l *Lifecycle) Running() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopCh != nil
}

// Started is closed once the goroutine runs.
func (l *Lifecycle) Started() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started == nil {
		l.started = make(chan struct{})
	}
	return l.started
}

// Stopped is closed once the goroutine has returned after a stop (nil
// before it was ever started).
func (l *Lifecycle) Stopped() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopped
}

// Context returns a context that ends when stop is closed (or cancel is
// called), for a loop whose calls take a context.
func Context(stop <-chan struct{}) (ctx context.Context, cancel context.CancelFunc) {
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
