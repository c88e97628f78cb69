package engine

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Changes is a subscription to the changes other processes made.
type Changes interface {
	C() <-chan Change
	Close()
}

// ChangeKind says what changed.
type ChangeKind int

const (
	// ChangeCancel: a cancel of run ID was requested.
	ChangeCancel ChangeKind = iota + 1
	// ChangeThreadGone: thread ID was deleted.
	ChangeThreadGone
	// ChangeOwnerDead: a process died; its runs' leases were expired so
	// that recovery takes them now.
	ChangeOwnerDead
	// ChangeReset: wake-ups may have been lost; forget what is cached.
	ChangeReset
)

// Change is one change another process made.
type Change struct {
	Kind ChangeKind
	ID   uuid.UUID
}

// Watch hands every change of a subscription (subscribe) to apply until
// ctx ends. When the subscription's channel closes (its subscriber fell
// behind, or the wake-ups restarted) it calls resync, to read again what
// the lost changes would have said, and subscribes again.
func Watch(ctx context.Context, subscribe func() Changes, apply func(context.Context, Change), resync func(context.Context)) {
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

func watchChanges(ctx context.Context, sub Changes, apply func(context.Context, Change)) {
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
