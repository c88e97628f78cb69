package thread

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/stream"
)

// Store persists threads, checkpoints, runs and run event logs. Every method
// returns *errcode.Error values for domain failures: not_found for an
// unknown or foreign thread, run or message; conflict for a reused id;
// run_in_progress when a thread already has a running run. Other errors are
// infrastructure failures.
type Store interface {
	// ThreadCreate inserts t. It returns the existing thread and false if
	// the id exists for the same caller, conflict if it exists for another.
	ThreadCreate(ctx context.Context, t *Thread) (*Thread, bool, error)
	// ThreadGet returns not_found for an unknown id or another caller's
	// thread. Every caller is checked: "" is a caller like any other, whose
	// threads are those created with caller "".
	ThreadGet(ctx context.Context, caller string, id uuid.UUID) (*Thread, error)
	// ThreadOwner returns the caller that owns the thread, or not_found: for
	// the service's own work on a thread (recovering its run), which then
	// reads it as that caller. Never answer a request with it.
	ThreadOwner(ctx context.Context, id uuid.UUID) (string, error)
	// ThreadList returns up to limit top-level threads (no Parent), most
	// recently updated first, after the cursor (nil: from the start).
	ThreadList(ctx context.Context, caller string, limit int, after *ThreadCursor) ([]*Thread, error)
	// ThreadUpdate applies a PATCH; not_found as ThreadGet.
	ThreadUpdate(ctx context.Context, caller string, id uuid.UUID, u ThreadUpdate) (*Thread, error)
	// ThreadDelete removes the thread and everything in it; not_found as ThreadGet.
	ThreadDelete(ctx context.Context, caller string, id uuid.UUID) error
	// ThreadSetHead stores the client's branch; not_found as ThreadGet.
	ThreadSetHead(ctx context.Context, caller string, id, head uuid.UUID) error
	// CheckpointsAfter returns the thread's checkpoints with Seq > after, in Seq order.
	CheckpointsAfter(ctx context.Context, threadID uuid.UUID, after int64) ([]checkpoint.Node, error)
	// ThreadRead returns, in one round trip, the caller's thread, its
	// checkpoints with Seq > after in Seq order, and its running run (nil
	// when none): what a snapshot reads. not_found as ThreadGet.
	ThreadRead(ctx context.Context, caller string, id uuid.UUID, after int64) (*Thread, []checkpoint.Node, *Run, error)

	// RunCreate starts a run and commits it at once, in one round trip: the
	// user message, the running run with its first log record, the
	// thread's new end and head. not_found for an unknown or foreign
	// thread; run_in_progress names the active run; conflict when the user
	// message id already exists or the thread grew past in.Run.TreeSeq;
	// invalid_fork when the parent is not in the thread.
	RunCreate(ctx context.Context, in RunCreate, first Record) (*Run, error)

	// RunCreateAll writes the starts of several runs, each as RunCreate
	// would and firsts[i] the first record of ins[i], in one round trip and
	// one commit. It is all or nothing: any refusal returns its error and
	// writes nothing.
	RunCreateAll(ctx context.Context, ins []RunCreate, firsts []Record) error
	// RunComplete writes a whole run at once, in its final state, in one
	// transaction: RunCreate's checks, the user message, the ended run,
	// the reply, the compacted log and the thread's new end, head and
	// title. Errors as RunCreate.
	RunComplete(ctx context.Context, in RunCreate, fin RunFinish) error
	// RunGet returns the run; not_found. Its LastSequence is exact for a
	// run that has ended; for a running one it may be lower (the group
	// commit's records are not counted).
	RunGet(ctx context.Context, threadID, runID uuid.UUID) (*Run, error)
	// RunByUserMessage returns the run that appended the user message; not_found.
	RunByUserMessage(ctx context.Context, threadID, messageID uuid.UUID) (*Run, error)
	// RunActive returns the thread's running run, or not_found.
	RunActive(ctx context.Context, threadID uuid.UUID) (*Run, error)
	// RunEventsAppend durably appends, in one transaction, one segment of
	// consecutive records to each run's log, if every segment's claim is
	// still its run's; else it writes nothing and returns a
	// *ClaimLostError naming the runs whose claim is not.
	RunEventsAppend(ctx context.Context, segs []Segment) error
	// RunEventsAfter returns the logged records with Seq > after, in order.
	RunEventsAfter(ctx context.Context, runID uuid.UUID, after int64) ([]Record, error)
	// RunEventsPage is RunEventsAfter cut to a page: the first records
	// after after whose RecordSize adds up to at most maxBytes (at least
	// one record), holding nothing else in memory, and whether more
	// follow.
	RunEventsPage(ctx context.Context, runID uuid.UUID, after int64, maxBytes int) ([]Record, bool, error)
	// RunLogPurge keeps what RunEventsAppend writes bounded: records of
	// ended runs are freed (their RunFinish holds their whole log), and a
	// running run's older records are moved to rows of its own, so a long
	// run holds nothing shared. It reports whether something is left to
	// free later.
	RunLogPurge(ctx context.Context) (more bool, err error)
	// RunFinish ends a running run under in.Run.Claim; a
	// *ClaimLostError if the run is not running under that claim any more
	// (recovered, ended, or its thread deleted).
	RunFinish(ctx context.Context, in RunFinish) error
	// RunFinishAll ends several running runs, each as RunFinish would, in
	// one round trip and one commit. It is all or nothing: any refusal
	// returns its error and writes nothing.
	RunFinishAll(ctx context.Context, ins []RunFinish) error
	// RunLeaseRenew extends the leases of the runs still running under
	// the given claims. It returns those whose cancel was requested
	// elsewhere, and lost: those not running under their claim any more.
	RunLeaseRenew(ctx context.Context, claims []RunClaim, until time.Time) (cancels, lost []uuid.UUID, err error)
	// RunRequestCancel flags a running run for its owner to cancel; conflict
	// when it is no longer running.
	RunRequestCancel(ctx context.Context, runID uuid.UUID) error
	// RunClaimExpired takes over up to limit running runs whose lease ended
	// before now, setting owner and lease and taking a new claim (the old
	// claim's writes fail from then on, and any that committed before are
	// in the log the claimer reads next), and returns them.
	RunClaimExpired(ctx context.Context, owner string, now, until time.Time, limit int) ([]*Run, error)
}

// Attachments loads attachment bytes for the model. It may be nil.
type Attachments interface {
	// AttachmentData returns the content type and bytes; not_found for
	// another caller's or an unknown attachment.
	AttachmentData(ctx context.Context, caller string, id uuid.UUID) (*checkpoint.Attachment, []byte, error)
}

// Hub fans run events out to live subscribers. Publish never blocks; a
// subscriber that falls behind is dropped (its channel closes with Lagged
// true) and catches up from the log.
type Hub interface {
	Publish(runID uuid.UUID, events ...Event)
	Subscribe(runID uuid.UUID) stream.Subscription[Event]
	// End closes every subscription of the run.
	End(runID uuid.UUID)
}
