package batch

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

// unavailable is the service's rule for a failed write of several (see
// the engine's retryable): an error without a code, or the store's word for a
// database outage, may hide a commit; a refusal does not.
func unavailable(err error) bool {
	if errors.Is(err, ErrBatcherStopped) {
		return false
	}
	e, coded := errcode.As(err)
	return !coded || e.Code == errcode.Unavailable
}

// TestBatcherMaybeWritten: when a write of several fails for want of the
// database, a request whose write alone is then refused is answered with
// that refusal marked MaybeWritten (the batch may have committed it); a
// batch refused outright marks nothing.
func TestBatcherMaybeWritten(t *testing.T) {
	t.Parallel()
	conflict := errcode.New(errcode.Conflict, "already exists")
	for _, tc := range []struct {
		name     string
		batchErr error
		want     bool
	}{
		{"connection lost", errcode.New(errcode.Unavailable, "the database is unavailable"), true},
		{"refused", errcode.New(errcode.Invalid, "bad row"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hold := make(chan struct{})
			entered := make(chan struct{})
			b := NewBatcher(func(context.Context, []int) error { return tc.batchErr },
				func(_ context.Context, x int) error {
					if x == 0 {
						close(entered)
						<-hold
						return nil
					}
					return conflict
				}, unavailable)
			b.Start()
			defer b.Stop()
			first := make(chan error, 1)
			go func() { first <- b.Write(0) }()
			<-entered // the next two queue behind it and go in one write
			answers := make(chan error, 2)
			for i := 1; i <= 2; i++ {
				go func() { answers <- b.Write(i) }()
			}
			release := sync.OnceFunc(func() { close(hold) })
			defer release() // also when the wait fails
			wait.Eventually(t, 10*time.Second, func() bool { return b.Waiting() >= 2 },
				"%v requests waiting after 10 s, want 2", func() any { return b.Waiting() })
			release()
			if err := <-first; err != nil {
				t.Fatalf("held write: %v", err)
			}
			for range 2 {
				err := <-answers
				var mw *MaybeWritten
				if errors.As(err, &mw) != tc.want || errcode.Of(err) != errcode.Conflict {
					t.Fatalf("answer: got %v (maybeWritten %v), want the conflict, maybeWritten %v", err, errors.As(err, &mw), tc.want)
				}
			}
		})
	}
}
