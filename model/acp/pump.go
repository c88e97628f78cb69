package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// pump streams the turn to onDelta until the prompt's answer (the turn's
// end), a permission request (Result.Waiting), a failure of the agent,
// its silence for the timeout, or ctx's end (then session/cancel). A
// continuation first answers the permissions it was asked.
func (s *session) pump(ctx context.Context, onDelta func(thread.Delta) error, approvals []thread.ModelApproval) (thread.ModelResult, error) {
	emit := func(d thread.Delta) error {
		s.rawMu.Lock()
		defer s.rawMu.Unlock()
		return onDelta(d)
	}
	if err := s.answer(approvals); err != nil {
		return thread.ModelResult{}, err
	}
	timeout := time.Duration(s.a.cfg.Timeout)
	idle := time.NewTimer(timeout)
	defer idle.Stop()
	for {
		select {
		case ev := <-s.events:
			if ev.perm != nil {
				return s.ask(ev.perm, emit)
			}
			if err := s.update(ev.update, emit); err != nil {
				return thread.ModelResult{}, err
			}
		case pr := <-s.promptDone:
			return s.end(pr, emit)
		case <-s.proc.failed:
			return thread.ModelResult{}, s.a.fail("%s", s.proc.reason())
		case <-s.proc.exited:
			select {
			case pr := <-s.promptDone:
				return s.end(pr, emit)
			default:
			}
			return thread.ModelResult{}, s.a.fail("%s", s.proc.reason())
		case <-idle.C:
			if quiet := time.Since(time.Unix(0, s.proc.seen.Load())); quiet < timeout {
				idle.Reset(timeout - quiet)
				continue
			}
			return thread.ModelResult{}, &errcode.Error{Code: errcode.ModelTimeout,
				Message: fmt.Sprintf("acp agent %s: nothing from the agent for %s", s.a.name, timeout)}
		case <-ctx.Done():
			s.cancel()
			return thread.ModelResult{}, ctx.Err()
		}
	}
}

// answer gives the agent the person's answers to its permissions: the
// option the person chose, or the first that says what they said. An
// option the agent did not offer (the engine checks them first) is a
// model_error.
func (s *session) answer(approvals []thread.ModelApproval) error {
	for _, ap := range approvals {
		w := s.pending[ap.ToolCallID]
		if w == nil {
			return s.a.fail("tool call %s waits for no permission of this agent", ap.ToolCallID)
		}
		delete(s.pending, ap.ToolCallID)
		if c := s.calls[ap.ToolCallID]; c != nil && !ap.Approved {
			c.rejected = true
		}
		if ap.OptionID == "" {
			w.reply <- choose(w.req.Options, ap.Approved)
			continue
		}
		if !offered(w.req.Options, ap.OptionID) {
			w.reply <- sdk.NewRequestPermissionOutcomeCancelled()
			return s.a.fail("tool call %s: the agent offered no option %q", ap.ToolCallID, ap.OptionID)
		}
		w.reply <- sdk.NewRequestPermissionOutcomeSelected(sdk.PermissionOptionId(ap.OptionID))
	}
	return nil
}

// offered reports whether the agent offered the option of id.
func offered(opts []sdk.PermissionOption, id string) bool {
	for _, o := range opts {
		if string(o.OptionId) == id {
			return true
		}
	}
	return false
}

// choose picks the option that says what the person said: allow once (or
// always) for an approval, reject once (or always) for a rejection; with
// no such option, the first option for an approval and cancelled for a
// rejection.
func choose(opts []sdk.PermissionOption, approved bool) sdk.RequestPermissionOutcome {
	kinds := []sdk.PermissionOptionKind{sdk.PermissionOptionKindRejectOnce, sdk.PermissionOptionKindRejectAlways}
	if approved {
		kinds = []sdk.PermissionOptionKind{sdk.PermissionOptionKindAllowOnce, sdk.PermissionOptionKindAllowAlways}
	}
	for _, k := range kinds {
		for _, o := range opts {
			if o.Kind == k {
				return sdk.NewRequestPermissionOutcomeSelected(o.OptionId)
			}
		}
	}
	if approved && len(opts) > 0 {
		return sdk.NewRequestPermissionOutcomeSelected(opts[0].OptionId)
	}
	return sdk.NewRequestPermissionOutcomeCancelled()
}

// ask opens the call the permission is about (if the agent did not) and
// sends its permission part; the step ends waiting.
func (s *session) ask(w *permWait, emit func(thread.Delta) error) (thread.ModelResult, error) {
	tc := w.req.ToolCall
	id := string(tc.ToolCallId)
	if err := s.open(id, deref(tc.Title), tc.RawInput, emit); err != nil {
		return thread.ModelResult{}, err
	}
	s.pending[id] = w
	type option struct {
		OptionID string `json:"optionId"`
		Name     string `json:"name"`
		Kind     string `json:"kind"`
	}
	opts := make([]option, 0, len(w.req.Options))
	for _, o := range w.req.Options {
		opts = append(opts, option{string(o.OptionId), o.Name, string(o.Kind)})
	}
	b, _ := json.Marshal(map[string]any{"id": "permission_" + id, "toolCallId": id, "title": deref(tc.Title),
		"options": opts, "key": s.key})
	if err := emit(thread.Delta{Kind: thread.DeltaData, Name: thread.PermissionPart, Data: b}); err != nil {
		return thread.ModelResult{}, err
	}
	return thread.ModelResult{StopReason: thread.StopToolCalls, Waiting: true}, nil
}

// end is the turn's end: every call the agent left open is answered as an
// error, and its stop reason becomes the step's.
func (s *session) end(pr promptResult, emit func(thread.Delta) error) (thread.ModelResult, error) {
	if pr.err != nil {
		return thread.ModelResult{}, s.a.fail("session/prompt: %s", s.why(pr.err))
	}
	for {
		select { // updates handed on before the answer
		case ev := <-s.events:
			if ev.update != nil {
				if err := s.update(ev.update, emit); err != nil {
					return thread.ModelResult{}, err
				}
			} else {
				ev.perm.reply <- sdk.NewRequestPermissionOutcomeCancelled()
			}
			continue
		default:
		}
		break
	}
	for _, id := range s.order {
		c := s.calls[id]
		if c.done {
			continue
		}
		why := "the agent reported no outcome"
		if c.rejected {
			why = "rejected by a person"
		}
		b, _ := json.Marshal(map[string]string{"status": "not completed", "error": why})
		c.done = true
		if err := emit(thread.Delta{Kind: thread.DeltaToolResult, ToolCallID: id, Data: b, IsError: true}); err != nil {
			return thread.ModelResult{}, err
		}
	}
	res := thread.ModelResult{StopReason: thread.StopDone}
	if u := pr.resp.Usage; u != nil {
		res.PromptTokens, res.CompletionTokens = u.InputTokens, u.OutputTokens
	}
	switch pr.resp.StopReason {
	case sdk.StopReasonEndTurn:
	case sdk.StopReasonMaxTokens, sdk.StopReasonMaxTurnRequests:
		res.StopReason = thread.StopLength
	case sdk.StopReasonRefusal:
		res.StopReason = thread.StopContentFilter
	case sdk.StopReasonCancelled:
		return res, s.a.fail("the agent ended the turn as cancelled, unasked")
	default:
		return res, s.a.fail("the agent ended the turn with an unknown stop reason %q", pr.resp.StopReason)
	}
	return res, nil
}

// cancel sends session/cancel, refuses the pending permissions and waits
// a moment for the prompt's answer (the agent's "cancelled").
func (s *session) cancel() {
	for id, w := range s.pending {
		w.reply <- sdk.NewRequestPermissionOutcomeCancelled()
		delete(s.pending, id)
	}
	ctx, stop := context.WithTimeout(s.life, cancelGrace)
	defer stop()
	_ = s.conn.Cancel(ctx, sdk.CancelNotification{SessionId: s.id})
	for {
		select {
		case ev := <-s.events:
			if ev.perm != nil {
				ev.perm.reply <- sdk.NewRequestPermissionOutcomeCancelled()
			}
		case <-s.promptDone:
			return
		case <-s.proc.exited:
			return
		case <-ctx.Done():
			return
		}
	}
}

// update maps one session update to deltas.
func (s *session) update(n *sdk.SessionNotification, emit func(thread.Delta) error) error {
	u := n.Update
	switch {
	case u.AgentMessageChunk != nil:
		return s.content(u.AgentMessageChunk.Content, thread.DeltaText, emit)
	case u.AgentThoughtChunk != nil:
		return s.content(u.AgentThoughtChunk.Content, thread.DeltaReasoning, emit)
	case u.ToolCall != nil:
		tc := u.ToolCall
		id := string(tc.ToolCallId)
		if err := s.open(id, tc.Title, tc.RawInput, emit); err != nil {
			return err
		}
		return s.result(id, tc.Status, tc.Content, tc.RawOutput, emit)
	case u.ToolCallUpdate != nil:
		tc := u.ToolCallUpdate
		id := string(tc.ToolCallId)
		if err := s.open(id, deref(tc.Title), tc.RawInput, emit); err != nil {
			return err
		}
		var st sdk.ToolCallStatus
		if tc.Status != nil {
			st = *tc.Status
		}
		return s.result(id, st, tc.Content, tc.RawOutput, emit)
	case u.Plan != nil:
		return emit(thread.Delta{Kind: thread.DeltaData, Name: "plan", Data: planData(string(n.SessionId), u.Plan.Entries)})
	}
	return nil // other updates (commands, modes) are in the raw records only
}

// content maps a content block: text to kind, anything else to a data
// part ("image", "audio", "resource" or "resource_link").
func (s *session) content(c sdk.ContentBlock, kind thread.DeltaKind, emit func(thread.Delta) error) error {
	if c.Text != nil {
		if c.Text.Text == "" {
			return nil
		}
		return emit(thread.Delta{Kind: kind, Text: c.Text.Text})
	}
	name, v := blockData(c)
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return emit(thread.Delta{Kind: thread.DeltaData, Name: name, Data: b})
}

// blockData is a non-text content block as a data part.
func blockData(c sdk.ContentBlock) (string, any) {
	switch {
	case c.Image != nil:
		return "image", map[string]any{"mimeType": c.Image.MimeType, "data": c.Image.Data, "uri": c.Image.Uri}
	case c.Audio != nil:
		return "audio", map[string]any{"mimeType": c.Audio.MimeType, "data": c.Audio.Data}
	case c.ResourceLink != nil:
		r := c.ResourceLink
		return "resource_link", map[string]any{"uri": r.Uri, "name": r.Name, "title": r.Title, "mimeType": r.MimeType}
	case c.Resource != nil:
		r := c.Resource.Resource
		switch {
		case r.TextResourceContents != nil:
			t := r.TextResourceContents
			return "resource", map[string]any{"uri": t.Uri, "mimeType": t.MimeType, "text": t.Text}
		case r.BlobResourceContents != nil:
			b := r.BlobResourceContents
			return "resource", map[string]any{"uri": b.Uri, "mimeType": b.MimeType, "blob": b.Blob}
		}
	}
	return "", nil
}

// open opens the call id unless the turn has it.
func (s *session) open(id, title string, input any, emit func(thread.Delta) error) error {
	if _, ok := s.calls[id]; ok {
		return nil
	}
	s.calls[id] = &callState{}
	s.order = append(s.order, id)
	if title == "" {
		title = "tool"
	}
	args := "{}"
	if input != nil {
		if b, err := json.Marshal(input); err == nil {
			args = string(b)
		}
	}
	return emit(thread.Delta{Kind: thread.DeltaToolCallArgs, ToolCallID: id, ToolName: title, ArgsText: args})
}

// result answers the call once its status is completed or failed: the
// result is {"status", "output" (the raw output), "content" (text, diffs,
// terminals)}.
func (s *session) result(id string, st sdk.ToolCallStatus, content []sdk.ToolCallContent, output any, emit func(thread.Delta) error) error {
	c := s.calls[id]
	if c.done || (st != sdk.ToolCallStatusCompleted && st != sdk.ToolCallStatusFailed) {
		return nil
	}
	c.done = true
	v := map[string]any{"status": string(st)}
	if output != nil {
		v["output"] = output
	}
	if len(content) > 0 {
		v["content"] = callContent(content)
	}
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{"status":"` + string(st) + `"}`)
	}
	return emit(thread.Delta{Kind: thread.DeltaToolResult, ToolCallID: id, Data: b, IsError: st == sdk.ToolCallStatusFailed})
}

// callContent is a call's content as JSON values: text as a string, other
// blocks as their data parts' values, a diff as {"path","oldText","newText"},
// a terminal as {"terminalId"}.
func callContent(cs []sdk.ToolCallContent) []any {
	out := make([]any, 0, len(cs))
	for _, c := range cs {
		switch {
		case c.Content != nil && c.Content.Content.Text != nil:
			out = append(out, c.Content.Content.Text.Text)
		case c.Content != nil:
			if name, v := blockData(c.Content.Content); v != nil {
				out = append(out, map[string]any{name: v})
			}
		case c.Diff != nil:
			out = append(out, map[string]any{"path": c.Diff.Path, "oldText": c.Diff.OldText, "newText": c.Diff.NewText})
		case c.Terminal != nil:
			out = append(out, map[string]any{"terminalId": c.Terminal.TerminalId})
		}
	}
	return out
}

// planData is an ACP plan as the demo model's plan part:
// {"id","title","tasks":[{"id","title","status"}]}, status pending,
// in_progress or done; one id per session, so each plan replaces the last.
func planData(session string, entries []sdk.PlanEntry) json.RawMessage {
	type task struct {
		ID     string `json:"id"`
		Title  string `json:"title"`
		Status string `json:"status"`
	}
	tasks := make([]task, 0, len(entries))
	for i, e := range entries {
		st := string(e.Status)
		if e.Status == sdk.PlanEntryStatusCompleted {
			st = "done"
		}
		tasks = append(tasks, task{strconv.Itoa(i + 1), e.Content, st})
	}
	b, _ := json.Marshal(map[string]any{"id": "plan_" + strings.TrimSpace(session), "title": "Plan", "tasks": tasks})
	return b
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
