package thread

import "sync"

// lifecycle owns one background goroutine, after River's internal
// services: start runs it once (a second start while it runs does
// nothing), stop closes its stop channel and waits for it to return, and
// Started and Stopped are closed when those happen, for tests to wait on.
// A stopped lifecycle may be started again.
type lifecycle struct {
	mu      sync.Mutex
	stopCh  chan struct{}
	started chan struct{}
	stopped chan struct{}
}

// start runs loop on a goroutine of its own until stop. It reports whether
// it started it (false: it runs already).
func (l *lifecycle) start(loop func(stop <-chan struct{})) bool {
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

// stop asks the goroutine to return and waits until it has; it does
// nothing if it does not run.
func (l *lifecycle) stop() {
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

// running reports whether the goroutine runs (started and not stopped).
func (l *lifecycle) running() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopCh != nil
}

// Started is closed once the goroutine runs.
func (l *lifecycle) Started() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started == nil {
		l.started = make(chan struct{})
	}
	return l.started
}

// Stopped is closed once the goroutine has returned after a stop (nil
// before it was ever started).
func (l *lifecycle) Stopped() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopped
}
