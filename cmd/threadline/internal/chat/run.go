package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/threadline/threadline/api/client"
)

// askUser is the client tool the chat declares: the model asks the
// person a question, answered inline.
var askUser = client.ToolSpec{
	Name:        "ask_user",
	Description: "Ask the person a question and wait for the answer.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"question":{"type":"string"},"choices":{"type":"array","items":{"type":"string"}}},"required":["question"]}`),
	Client:      true,
}

// config is a new run's configuration: the model and every server tool,
// plus ask_user.
func (s *session) config() *client.RunConfig {
	cfg := &client.RunConfig{Model: s.model}
	for _, t := range s.tools {
		cfg.Tools = append(cfg.Tools, client.ToolSpec{Name: t.Name})
	}
	cfg.Tools = append(cfg.Tools, askUser)
	return cfg
}

// run starts a run, streams it, and while it waits for the person asks
// and continues it.
func (s *session) run(ctx context.Context, req client.RunRequest) {
	if s.threadID == "" {
		s.threadID = uuid.NewString()
	}
	req.RunConfig = s.config()
	for {
		r, err := s.c.RunStart(ctx, s.threadID, req)
		if err != nil {
			s.printf("%s\n", s.errText(err))
			return
		}
		final := s.stream(r)
		if final == nil || final.RunStatus != client.StatusRequiresAction {
			return
		}
		var ok bool
		if req, ok = s.answer(final.LastMessage()); !ok {
			s.printf("%s\n", s.dim("(the reply waits; answer later by opening the thread again)"))
			return
		}
	}
}

// stream prints a run's events as they arrive and returns its final
// snapshot (nil when the stream failed).
func (s *session) stream(r *client.Run) *client.Event {
	s.current.Store(r)
	defer s.current.Store(nil)
	p := printer{s: s, calls: map[string]bool{}}
	s.printf("assistant> ")
	p.bol = false
	var final *client.Event
	for ev, err := range r.Events() {
		if err != nil {
			s.printf("\n%s\n", s.errText(err))
			return nil
		}
		if ev.Type == client.EventSnapshot {
			s.apply(ev.ThreadID, ev.Messages, ev.Repository)
			if ev.Final() {
				final = &ev
			}
			continue
		}
		p.event(&ev)
	}
	if final == nil {
		return nil
	}
	p.line()
	var notes []string
	if n := r.Rejoins(); n > 0 {
		notes = append(notes, fmt.Sprintf("reconnected %d×", n))
	}
	if final.RunStatus != client.StatusSucceeded {
		notes = append(notes, final.RunStatus)
	}
	if b := s.branch(s.headID()); b != "" {
		notes = append(notes, "branch "+strings.Trim(b, "[] "))
	}
	if len(notes) > 0 {
		s.printf("%s\n", s.dim("("+strings.Join(notes, ", ")+")"))
	}
	return final
}

// printer writes a reply's events: text as it is, reasoning dimmed, tool
// calls as "⚙ name args → result".
type printer struct {
	s         *session
	calls     map[string]bool
	reasoning bool
	bol       bool // the last text printed ended a line
}

// text prints a piece of the reply.
func (p *printer) text(t string) {
	if t != "" {
		p.s.printf("%s", t)
		p.bol = strings.HasSuffix(t, "\n")
	}
}

// line starts a line unless one is started.
func (p *printer) line() {
	if !p.bol {
		p.s.printf("\n")
		p.bol = true
	}
}

func (p *printer) event(ev *client.Event) {
	s := p.s
	if p.reasoning && ev.Type != client.EventReasoning {
		p.line()
		p.reasoning = false
	}
	switch ev.Type {
	case client.EventToken:
		p.text(ev.Text)
	case client.EventReasoning:
		p.reasoning = true
		p.text(s.dim(ev.Text))
	case client.EventToolCall:
		if !p.calls[ev.ToolCallID] {
			p.calls[ev.ToolCallID] = true
			p.line()
			p.text(s.dim("⚙ " + ev.ToolName + " "))
		}
		if ev.ArgsText != nil {
			p.text(s.dim(*ev.ArgsText))
		}
	case client.EventToolResult:
		if !p.calls[ev.ToolCallID] {
			// A continuation answers a call an earlier run made: name it.
			p.calls[ev.ToolCallID] = true
			p.line()
			p.text(s.dim("⚙ " + s.callText(ev.ToolCallID)))
		}
		mark := "→"
		if ev.IsError {
			mark = "→ error:"
		}
		p.text(s.dim(" "+mark+" "+string(ev.Result)) + "\n")
	case client.EventData:
		p.line()
		p.text(s.dim(dataText(ev.Name, ev.Data)) + "\n")
	case client.EventError:
		p.line()
		p.text(fmt.Sprintf("error: %s: %s\n", ev.Code, ev.Error))
	}
}

// answer asks the person for every call the reply waits for: y/n for a
// tool that needs approval, an answer for ask_user (or any client tool).
// It returns the continuation, or false when stdin ended.
func (s *session) answer(msg *client.Message) (client.RunRequest, bool) {
	req := client.RunRequest{ParentMessageID: msg.ID}
	for _, call := range msg.WaitingCalls() {
		if s.needsApproval(call.ToolName) {
			line, ok := s.ask(fmt.Sprintf("approve %s %s? [y/n] ", call.ToolName, call.ArgsText))
			if !ok {
				return req, false
			}
			yes := strings.HasPrefix(strings.ToLower(strings.TrimSpace(line)), "y")
			a := client.Approval{ToolCallID: call.ToolCallID, Approved: yes}
			if !yes {
				a.Reason = "declined in threadline chat"
			}
			req.Approvals = append(req.Approvals, a)
			continue
		}
		line, ok := s.ask(question(call) + "\nanswer> ")
		if !ok {
			return req, false
		}
		req.ToolResults = append(req.ToolResults, client.ToolResult{ToolCallID: call.ToolCallID, Result: strings.TrimSpace(line)})
	}
	return req, true
}

// callText is "name args" of a tool call of the reply shown.
func (s *session) callText(id string) string {
	if len(s.path) > 0 {
		for _, p := range s.path[len(s.path)-1].Content {
			if p.Type == "tool-call" && p.ToolCallID == id {
				return p.ToolName + " " + p.ArgsText
			}
		}
	}
	return id
}

func (s *session) needsApproval(name string) bool {
	for _, t := range s.tools {
		if t.Name == name {
			return t.Approval
		}
	}
	return false
}

// question is how a client tool's call is put to the person: ask_user's
// question and choices, else the tool and its arguments.
func question(call client.Part) string {
	var q struct {
		Question string   `json:"question"`
		Choices  []string `json:"choices"`
	}
	if json.Unmarshal(call.Args, &q) != nil || q.Question == "" {
		return fmt.Sprintf("? %s %s", call.ToolName, call.ArgsText)
	}
	if len(q.Choices) > 0 {
		return fmt.Sprintf("? %s (%s)", q.Question, strings.Join(q.Choices, " / "))
	}
	return "? " + q.Question
}

// ask prints a prompt and reads a line; false when stdin ended.
func (s *session) ask(prompt string) (string, bool) {
	s.printf("%s", prompt)
	line, ok := <-s.lines
	return line, ok
}

// show prints a stored message: its role, branch, reasoning and tool
// calls dimmed, and its text.
func (s *session) show(m *client.Message) {
	role := "you"
	if m.Role != "user" {
		role = m.Role
	}
	s.printf("%s%s> ", s.dim(s.branch(m.ID)), role)
	p := printer{s: s}
	for _, part := range m.Content {
		switch part.Type {
		case "text":
			p.text(part.Text)
		case "reasoning":
			p.text(s.dim(part.Text))
			p.line()
		case "tool-call":
			res := "(waiting)"
			if part.Result != nil {
				res = "→ " + string(part.Result)
			}
			p.line()
			p.text(s.dim("⚙ "+part.ToolName+" "+part.ArgsText+" "+res) + "\n")
		case "data":
			p.line()
			p.text(s.dim(dataText(part.Name, part.Data)) + "\n")
		}
	}
	if m.Status != nil && m.Status.Type == "incomplete" {
		p.text(" " + s.dim("("+m.Status.Reason+")"))
	}
	p.line()
}

// dataText is a data part in a line: a plan's progress, the files a turn
// wrote, else the value (its start).
func dataText(name string, data json.RawMessage) string {
	var v struct {
		Title string `json:"title"`
		Tasks []struct {
			Status string `json:"status"`
		} `json:"tasks"`
	}
	var files []struct {
		Filename string `json:"filename"`
	}
	switch {
	case name == "plan" && json.Unmarshal(data, &v) == nil && len(v.Tasks) > 0:
		done := 0
		for _, t := range v.Tasks {
			if t.Status == "done" {
				done++
			}
		}
		return fmt.Sprintf("[plan] %s: %d/%d done", v.Title, done, len(v.Tasks))
	case name == "files" && json.Unmarshal(data, &files) == nil && len(files) > 0:
		names := make([]string, len(files))
		for i, f := range files {
			names[i] = f.Filename
		}
		return "[files] " + strings.Join(names, ", ")
	}
	text := string(data)
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	return "[" + name + "] " + text
}
