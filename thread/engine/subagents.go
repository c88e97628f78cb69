package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine/internal/runner"
)

// delegator runs the delegate tool's sub-agents on the Service: each a
// child thread with one run, in this process.
type delegator struct{ s *Service }

var _ runner.Delegator = delegator{}

// Delegate creates the child thread with the task as its first message,
// starts its run with the parent's run config and follows it to its end,
// passing each event to emit. A cancel of the parent (ctx) cancels the
// child, whose end is still awaited. The result is the child's reply
// text; IsError with the reason when it could not start or did not
// succeed.
func (d delegator) Delegate(ctx context.Context, del runner.Delegation, emit func(thread.Event)) thread.ToolOutput {
	s := d.s
	var title *string
	if del.Title != "" {
		t := thread.Storable(del.Title)
		title = &t
	}
	req := thread.RunRequest{
		Message: &thread.UserMessage{Content: []checkpoint.Part{{Type: checkpoint.PartText, Text: thread.Storable(del.Task)}}},
		Config:  del.Config,
		Child: &thread.ChildThread{Depth: del.Depth, Title: title, Parent: thread.ThreadParent{
			ThreadID: del.Parent.ThreadID, RunID: del.Parent.ID, MessageID: del.Parent.MessageID, ToolCallID: del.CallID}},
	}
	run, _, err := s.StartRun(ctx, del.Caller, del.ThreadID, req)
	if err != nil {
		if ctx.Err() != nil {
			return tool.ErrorResult("cancelled")
		}
		return tool.ErrorResult("the sub-agent could not start: " + err.Error())
	}
	stop := context.AfterFunc(ctx, func() {
		if ar := s.active.Get(run.ID); ar != nil {
			ar.Cancel(thread.RunCancelled)
		}
	})
	defer stop()
	var final *thread.Snapshot
	var failure string
	err = s.FollowRun(context.WithoutCancel(ctx), del.Caller, run, 0, func(ev thread.Event, _ bool) error {
		emit(ev)
		switch {
		case ev.Final():
			final = ev.Snapshot
		case ev.Type == thread.KindError:
			failure = ev.Text
		}
		return nil
	})
	if err != nil {
		return tool.ErrorResult("the sub-agent's run could not be followed: " + err.Error())
	}
	return subagentResult(run, final, failure)
}

// subagentResult is a delegate call's answer from its child's final
// snapshot: the reply's text when it succeeded, else an error naming how
// it ended and why.
func subagentResult(run *thread.Run, final *thread.Snapshot, failure string) thread.ToolOutput {
	if final == nil {
		return tool.ErrorResult(fmt.Sprintf("the sub-agent's run %s ended without its final snapshot", run.ID))
	}
	var text string
	if n := final.Tree.Get(run.MessageID); n != nil {
		text = n.Text()
	}
	if final.RunStatus != thread.RunSucceeded {
		msg := fmt.Sprintf("the sub-agent's run %s ended %s", run.ID, final.RunStatus)
		if failure != "" {
			msg += ": " + failure
		}
		return tool.ErrorResult(msg)
	}
	b, _ := json.Marshal(text) // a string: always marshals
	return thread.ToolOutput{Value: b}
}

// DelegateSpec is the delegate tool as models are told it and GET /tools
// lists it.
var DelegateSpec = runner.DelegateSpec
