package wait_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/threadline/threadline/thread/threadtest/wait"
)

func TestEventuallyReturnsOnceTrue(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	wait.Eventually(t, time.Minute, func() bool { return calls.Add(1) == 3 }, "never true")
	if got := calls.Load(); got != 3 {
		t.Fatalf("calls: got %d, want 3 (stops at the first true)", got)
	}
}

// recorder is a testing.TB that records a failure and ends the calling
// goroutine as t.Fatal does.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatal(args ...any) {
	r.failed = fmt.Sprint(args...)
	runtime.Goexit()
}

func TestEventuallyFailsAtTheDeadline(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	n := 0
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		wait.Eventually(r, 20*time.Millisecond, func() bool { n++; return false }, "still %s after %v calls", "false", func() any { return n })
	}()
	<-done
	if time.Since(start) < 20*time.Millisecond {
		t.Errorf("failed before the timeout")
	}
	if want := fmt.Sprintf("still false after %d calls", n); r.failed != want || n < 2 {
		t.Fatalf("failure: got %q after %d calls, want %q after some calls", r.failed, n, want)
	}
}
