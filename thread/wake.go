package thread

import (
	"github.com/google/uuid"
)

// Wakeups is how this process hears, within milliseconds of their commit,
// of the writes of the other processes that share the database: a run's
// log grew or ended, a cancel was requested, a thread was deleted, a
// process died. A wake-up only says "read again": the store stays the
// source of truth, and without wake-ups (Config.Wakeups nil) followers of
// other processes' runs poll and cancels wait for the lease renewal.
type Wakeups interface {
	// WakeRun returns a subscription woken whenever the run's log grows,
	// the run ends or is deleted, in any process, and whenever wake-ups
	// may have been lost (a reconnect). Wake-ups coalesce.
	WakeRun(runID uuid.UUID) Wake
	// Changes returns a subscription to cancels, deleted threads, dead
	// processes and resets. Its channel closes when the subscriber fell
	// behind (it then resubscribes and treats it as a reset) or the
	// Wakeups stopped.
	Changes() Changes
}

// Wake is a subscription to one run's wake-ups: its channel fires
// whenever the run's log may have grown (wake-ups coalesce).
type Wake interface {
	C() <-chan struct{}
	Close()
}

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
