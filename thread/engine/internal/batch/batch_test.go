package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/threadline/threadline/thread/threadtest/wait"
)

// TestBatcher: requests that arrive while a write is in flight go in one
// write of at most max; a refused write of several is retried one request
// at a time, each getting its own answer.
func TestBatcher(t *testing.T) {
	t.Parallel()
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("refused=%v", refuse), func(t *testing.T) {
			t.Parallel()
			hold, entered := make(chan struct{}), make(chan struct{})
			var mu sync.Mutex
			var writes []int // the size of each write
			record := func(n int) {
				mu.Lock()
				writes = append(writes, n)
				mu.Unlock()
			}
			errOdd := errors.New("odd")
			b := NewBatcher(func(_ context.Context, xs []int) error {
				record(len(xs))
				if refuse {
					return errOdd
				}
				return nil
			}, func(_ context.Context, x int) error {
				record(1)
				if x == 0 {
					close(entered)
					<-hold
				}
				if refuse && x%2 == 1 {
					return errOdd
				}
				return nil
			}, unavailable)
			b.max = 4
			b.Start()
			defer b.Stop()
			answers := make([]chan error, 11)
			for i := range answers {
				answers[i] = make(chan error, 1)
				go func() { answers[i] <- b.Write(i) }()
				if i == 0 {
					<-entered // the first write is held; the rest queue
				}
			}
			// The other ten queue behind the held write.
			release := sync.OnceFunc(func() { close(hold) })
			defer release() // also when the wait fails
			wait.Eventually(t, 10*time.Second, func() bool { return b.Waiting() >= 10 },
				"%v requests waiting after 10 s, want 10", func() any { return b.Waiting() })
			release()
			for i, a := range answers {
				err := <-a
				if want := refuse && i%2 == 1; (err != nil) != want {
					t.Errorf("request %d: got %v, want an error %v", i, err, want)
				}
			}
			want := []int{1, 4, 4, 2}
			if refuse {
				want = []int{1, 4, 1, 1, 1, 1, 4, 1, 1, 1, 1, 2, 1, 1}
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(writes, want) {
				t.Errorf("writes: got sizes %v, want %v", writes, want)
			}
		})
	}
}
