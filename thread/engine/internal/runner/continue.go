package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// Human in the loop: a step that calls a client tool, or a server tool
// marked approval, ends its run requires_action once the other calls of
// the step are answered; the turn's message waits with status
// requires-action. A continuation run (RunRequest.ToolResults, Approvals)
// answers every waiting call and goes on with the turn: it appends an
// assistant checkpoint under the waiting one holding the whole turn (see
// checkpoint.TurnTip), and streams into the turn's message id.

// waitingStatus is the status of a turn's message that waits for a person.
var waitingStatus = checkpoint.Status{Type: "requires-action", Reason: "tool-calls"}

// WaitingTip returns the newest checkpoint of the turn the continuation
// names, once every call it waits for is answered by the request as its
// kind needs: a client tool by a result, an approval tool by an approval.
// Errors: invalid_fork when the message does not wait; invalid_request
// for a call left unanswered, answered the wrong way or not waiting.
func (s *Runner) WaitingTip(tree *checkpoint.Tree, req thread.RunRequest) (*checkpoint.Node, error) {
	tip := tree.TurnTip(req.ParentID)
	if tip == nil {
		return nil, errcode.New(errcode.InvalidFork, "parent_message_id %s is not a message of this thread", req.ParentID)
	}
	if tip.Role != checkpoint.RoleAssistant || tip.Status == nil || *tip.Status != waitingStatus || len(tree.Children(tip.ID)) > 0 {
		return nil, errcode.New(errcode.InvalidFork, "message %s does not wait for tool results or approvals", req.ParentID)
	}
	results, approvals := map[string]bool{}, map[string]bool{}
	for _, a := range req.ToolResults {
		results[a.CallID] = true
	}
	for _, a := range req.Approvals {
		approvals[a.CallID] = true
		if err := checkOption(tip.Content, a); err != nil {
			return nil, err
		}
	}
	waiting := 0
	for _, p := range tip.Content {
		if p.Type != checkpoint.PartToolCall || p.Result != nil {
			continue
		}
		waiting++
		approval := s.cfg.Tools != nil && s.needsApproval(p.ToolName) || permission(tip.Content, p.ToolCallID) != nil
		switch {
		case approval && !approvals[p.ToolCallID]:
			return nil, errcode.New(errcode.Invalid, "tool call %s (%s) waits for an approval", p.ToolCallID, p.ToolName)
		case !approval && !results[p.ToolCallID]:
			return nil, errcode.New(errcode.Invalid, "tool call %s (%s) waits for a tool result", p.ToolCallID, p.ToolName)
		}
	}
	if waiting != len(results)+len(approvals) {
		return nil, errcode.New(errcode.Invalid, "tool_results and approvals must answer exactly the calls message %s waits for", req.ParentID)
	}
	return tip, nil
}

// InheritConfig gives a continuation without run_config the config of
// the run that left the turn waiting.
func (s *Runner) InheritConfig(ctx context.Context, threadID uuid.UUID, tip *checkpoint.Node, cfg thread.RunConfig) (thread.RunConfig, error) {
	if !reflect.ValueOf(cfg).IsZero() {
		return cfg, nil
	}
	prev, err := s.store.RunGet(ctx, threadID, tip.RunID)
	if err != nil {
		return cfg, fmt.Errorf("the run of message %s: %w", tip.ID, err)
	}
	return prev.Config, nil
}

// answer logs a continuation's answers: client results as they are, a
// rejected approval as an error, and runs the approved calls. The answers
// to calls the model itself asked about (a thread.PermissionPart) are not
// logged: they are returned, for the model's next step.
func (t *turnRun) answer(ctx context.Context, cfg thread.RunConfig, ans *Answers) ([]thread.ModelApproval, error) {
	var approved []pendingCall
	var agent []thread.ModelApproval
	for _, a := range ans.Results {
		t.add(thread.Record{Kind: thread.KindToolResult, CallID: a.CallID, Data: thread.StorableJSON(a.Result), IsError: a.IsError})
	}
	content := t.fold.Content()
	for _, a := range ans.Approvals {
		p, _ := t.fold.Call(a.CallID)
		if perm := permission(content, a.CallID); perm != nil {
			agent = append(agent, thread.ModelApproval{ToolCallID: a.CallID, Approved: a.Approved, OptionID: a.OptionID, Reason: a.Reason,
				Permission: perm})
			continue
		}
		if a.Approved {
			approved = append(approved, pendingCall{id: a.CallID, name: p.ToolName, args: json.RawMessage(p.ArgsText), approved: true})
			continue
		}
		msg := "rejected by a person"
		if a.Reason != "" {
			msg += ": " + thread.Storable(a.Reason)
		}
		t.add(thread.Record{Kind: thread.KindToolResult, CallID: a.CallID, Data: thread.JSONString([]byte(msg)), IsError: true})
	}
	if len(approved) == 0 {
		return agent, nil
	}
	return agent, t.runCalls(ctx, cfg, approved)
}

// checkOption checks an approval's option_id: it names an option of the
// permission the agent asked about its call, whose kind agrees with
// approved. invalid_request says which does not.
func checkOption(content []checkpoint.Part, a thread.Approval) error {
	if a.OptionID == "" {
		return nil
	}
	perm := permission(content, a.CallID)
	if perm == nil {
		return errcode.New(errcode.Invalid, "approvals: tool call %s is not an agent's permission request: it takes no option_id", a.CallID)
	}
	_, opts, _ := thread.ReadPermission(perm)
	ids := make([]string, 0, len(opts))
	for _, o := range opts {
		if o.ID != a.OptionID {
			ids = append(ids, fmt.Sprintf("%q", o.ID))
			continue
		}
		if approves, known := o.Approves(); known && approves != a.Approved {
			return errcode.New(errcode.Invalid, "approvals: option %q of tool call %s is %s: approved must be %t", a.OptionID, a.CallID, o.Kind, approves)
		}
		return nil
	}
	return errcode.New(errcode.Invalid, "approvals: tool call %s has no option %q (its options: %s)", a.CallID, a.OptionID, strings.Join(ids, ", "))
}

// permission returns the value of the thread.PermissionPart data part that
// asks about call id, or nil.
func permission(content []checkpoint.Part, id string) json.RawMessage {
	for _, p := range content {
		if p.Type != checkpoint.PartData || p.Name != thread.PermissionPart {
			continue
		}
		if callID, _, ok := thread.ReadPermission(p.Data); ok && callID == id {
			return p.Data
		}
	}
	return nil
}

// Answers is what a continuation run answers before its first step.
type Answers struct {
	Results   []thread.ToolResult
	Approvals []thread.Approval
}

// waits reports whether a call of the step waits for a person: a client
// tool, or a server tool marked approval.
func (s *Runner) waits(cfg thread.RunConfig, name string) bool {
	return cfg.IsClient(name) || s.cfg.Tools != nil && cfg.Allows(name) && s.needsApproval(name)
}
