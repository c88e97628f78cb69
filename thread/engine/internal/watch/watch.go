// Package watch holds Watch, the loop that hands the changes other
// processes made (cancels, deleted threads, dead owners, resets) to the
// engine, resubscribing and resyncing when changes may have been lost.
package watch

import (
	"context"
	"time"

	"github.com/threadline/threadline/thread"
)

// Watch hands every change of a subscription (subscribe) to apply until
// ctx ends. When the subscription's channel closes (its subscriber fell
// behind, or the wake-ups restarted) it calls resync, to read again what
// the lost changes would have said, and subscribes again.
func Watch(ctx context.Context, subscribe func() thread.Changes, apply func(context.Context, thread.Change), resync func(context.Context)) {
	for {
		sub := subscribe()
		watchChanges(ctx, sub, apply)
		sub.Close()
		if ctx.Err() != nil {
			return
		}
		resync(ctx) // it fell behind or the wake-ups restarted
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func watchChanges(ctx context.Context, sub thread.Changes, apply func(context.Context, thread.Change)) {
	for {
		select {
		case <-ctx.Done():
			return
		case c, ok := <-sub.C():
			if !ok {
				return
			}
			apply(ctx, c)
		}
	}
}
