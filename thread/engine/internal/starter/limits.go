package starter

import (
	"fmt"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// Limits bound a start: as engine.Limits, defaults applied.
type Limits struct {
	RunsPerCaller, RunsPerProcess, MessagesPerThread int
	InlineBytes                                      int64
}

// limitCallerRuns refuses a run when this process has RunsPerProcess in
// progress (unavailable: retry later or elsewhere), or the caller has
// RunsPerCaller here (rate_limited). It is checked at the start, so
// starts that race may pass it together: it bounds the count, not to the
// run.
func (s *Starter) limitCallerRuns(caller string) error {
	max, all := s.cfg.Limits.RunsPerCaller, s.cfg.Limits.RunsPerProcess
	total, n := s.active.Count(caller)
	if all >= 0 && total >= all {
		return errcode.New(errcode.Unavailable, "this process has %d runs in progress; its limit is %d: retry later", total, all)
	}
	if max >= 0 && n >= max {
		return errcode.New(errcode.RateLimited, "%d runs are in progress for this caller; the limit is %d: wait for one to end", n, max)
	}
	return nil
}

// limitThreadSize refuses a run that would take the thread over
// MessagesPerThread (a run adds up to two messages).
func (s *Starter) limitThreadSize(tree *checkpoint.Tree, adds int) error {
	max := s.cfg.Limits.MessagesPerThread
	if max < 0 || tree.Len()+adds <= max {
		return nil
	}
	return errcode.New(errcode.TooLarge, "the thread has %d messages; the limit is %d: start a new thread", tree.Len(), max)
}

// overInline names an attachment that did not fit the model call's budget.
func overInline(a checkpoint.Attachment, limit int64) thread.ModelPart {
	return thread.ModelPart{Type: thread.PartText, Text: fmt.Sprintf("[attached file %s (%s, %d bytes); not shown to the model: the attachments of one request may carry %d bytes]",
		a.Name, a.ContentType, a.Size, limit)}
}
