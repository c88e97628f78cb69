// Package wait is the tests' one bounded poll, for a state no signal
// announces (another process's, the kernel's, a goroutine parked in a
// lock). It imports nothing of the project, so any test may use it.
package wait

import (
	"fmt"
	"testing"
	"time"
)

// Eventually calls cond until it reports true, sleeping a short while
// between calls (from a millisecond, doubling, at most maxBackoff), and
// fails t with the message (fmt.Sprintf of format and args) once timeout
// has passed. cond runs on the test's goroutine, so it may call t.Fatal.
// An argument that is a func() any is called when the message is made,
// so it can tell the last state cond saw.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for backoff := time.Millisecond; !cond(); backoff = min(2*backoff, maxBackoff) {
		if time.Now().After(deadline) {
			t.Fatal(message(format, args))
		}
		time.Sleep(backoff)
	}
}

// maxBackoff bounds the sleep between two calls of a condition.
const maxBackoff = 50 * time.Millisecond

func message(format string, args []any) string {
	shown := make([]any, len(args))
	for i, a := range args {
		if f, ok := a.(func() any); ok {
			a = f()
		}
		shown[i] = a
	}
	return fmt.Sprintf(format, shown...)
}
