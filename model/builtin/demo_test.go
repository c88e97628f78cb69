package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/model/builtin"
	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/thread"
)

// demoChat is the text of the demo's reply to text without tools (a
// chat call).
func demoChat(t *testing.T, text string, call int64) string {
	t.Helper()
	var b strings.Builder
	res, err := streamText(builtin.NewDemo(0), context.Background(), userReq(text, call), func(s string) error { b.WriteString(s); return nil })
	if err != nil || res.StopReason != "stop" || res.Model != "builtin" || res.CompletionTokens == 0 {
		t.Fatalf("Stream(%q): got %+v, %v", text, res, err)
	}
	return b.String()
}

func TestDemoChat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		prompt string
		want   []string
		not    []string
	}{
		{"hello, who are you?", []string{"built-in model", "You asked: “hello, who are you?”", "- **Arithmetic**", "OPENAI_API_KEY", "`model/README.md`"}, nil},
		{"what is 12*7?", []string{"**12*7 = 84**", "`calculator` tool"}, []string{"built-in model"}},
		{"and (1 + 2) ^ 2 / 4?", []string{"**(1 + 2) ^ 2 / 4 = 2.25**"}, nil},
		{"what is 1/0", []string{"does not work out", "division by zero"}, nil},
		{"what time is it?", []string{"`clock` tool"}, nil},
		{"write some code in python please", []string{"```python\ndef fibonacci(n):", "\n```\n"}, nil},
		{"show me code", []string{"```go\npackage main"}, nil},
		{"a table please", []string{"| provider | `run_config.model` | what to set |\n|---|---|---|\n", "| Ollama | `ollama:llama3.2` |"}, nil},
		{"give me a list of ideas?", []string{"- It has **6** words.", "*ideas*", "a question"}, nil},
		{"plan a trip to Rome", []string{"I tick each task off as I go", "4. Every task is done"}, []string{`"tasks"`}},
		{"", []string{"You asked: nothing"}, nil},
		{"quote `this` " + strings.Repeat("long ", 100), []string{"quote 'this' long", "…”"}, nil},
	}
	for _, tc := range tests {
		got := demoChat(t, tc.prompt, 1)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%q: got\n%s\nwant it to contain %q", tc.prompt, got, w)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(got, w) {
				t.Errorf("%q: got\n%s\nwant no %q in it", tc.prompt, got, w)
			}
		}
		if again := demoChat(t, tc.prompt, 1); again != got {
			t.Errorf("%q: the same request gave two replies:\n%s\n%s", tc.prompt, got, again)
		}
	}
	// A regenerated reply (another call) may open differently; every one
	// is one of the greetings.
	seen := map[string]bool{}
	for call := int64(1); call <= 12; call++ {
		first, _, _ := strings.Cut(demoChat(t, "hello", call), ":")
		seen[first] = true
	}
	if len(seen) < 2 {
		t.Errorf("openings over 12 calls: got %v, want more than one", seen)
	}
}

// agentStep runs one demo step and returns its deltas and result.
func agentStep(t *testing.T, m thread.Model, req thread.ModelRequest) ([]thread.Delta, thread.ModelResult) {
	t.Helper()
	var ds []thread.Delta
	res, err := m.Stream(context.Background(), req, func(d thread.Delta) error { ds = append(ds, d); return nil })
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	return ds, res
}

// turn is a tiny agent loop over the demo and the real built-in tools: it
// runs steps, executing each step's calls, until the model stops, and
// returns every delta and the finished assistant message.
func turn(t *testing.T, prompt string, specs []thread.ToolSpec, now time.Time) ([]thread.Delta, thread.ModelMessage, int) {
	t.Helper()
	reg := tool.NewRegistry(time.Second)
	if err := reg.Add(tool.Builtins(func() time.Time { return now })...); err != nil {
		t.Fatal(err)
	}
	m := builtin.NewDemo(0)
	asst := thread.ModelMessage{Role: checkpoint.RoleAssistant}
	var all []thread.Delta
	for steps := 1; steps <= 4; steps++ {
		req := thread.ModelRequest{Tools: specs, Call: 1, Messages: []thread.ModelMessage{
			{Role: checkpoint.RoleUser, Parts: []thread.ModelPart{{Type: "text", Text: prompt}}}}}
		if len(asst.Parts) > 0 {
			req.Messages = append(req.Messages, asst)
		}
		ds, res := agentStep(t, m, req)
		all = append(all, ds...)
		var text strings.Builder
		for _, d := range ds {
			if d.Kind == thread.DeltaText {
				text.WriteString(d.Text)
			}
		}
		if text.Len() > 0 {
			asst.Parts = append(asst.Parts, thread.ModelPart{Type: "text", Text: text.String()})
		}
		if res.StopReason != thread.StopToolCalls {
			return all, asst, steps
		}
		for _, c := range res.ToolCalls {
			r, err := reg.Call(context.Background(), c.Name, json.RawMessage(c.ArgsText))
			if err != nil {
				t.Fatal(err)
			}
			c.Result, c.IsError = r.Value, r.IsError
			asst.Parts = append(asst.Parts, thread.ModelPart{Type: "tool-call", Call: &c})
		}
	}
	t.Fatalf("%q: the demo did not stop after 4 steps", prompt)
	return nil, asst, 0
}

func callsOf(ds []thread.Delta) (order []string, args map[string]string, names map[string]string) {
	args, names = map[string]string{}, map[string]string{}
	for _, d := range ds {
		if d.Kind != thread.DeltaToolCallArgs {
			continue
		}
		if _, ok := args[d.ToolCallID]; !ok {
			order = append(order, d.ToolCallID)
		}
		args[d.ToolCallID] += d.ArgsText
		names[d.ToolCallID] = d.ToolName
	}
	return order, args, names
}

func lastText(m thread.ModelMessage) string {
	for i := len(m.Parts) - 1; i >= 0; i-- {
		if m.Parts[i].Type == "text" {
			return m.Parts[i].Text
		}
	}
	return ""
}

func TestDemoAgent(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 21, 30, 0, 0, time.UTC)
	all := []thread.ToolSpec{tool.Calculator{}.Spec(), tool.NewClock(nil).Spec(), tool.Wait{}.Spec()}
	tests := []struct {
		prompt    string
		tools     []thread.ToolSpec
		wantCalls []string // name and args of each call of the first step
		wantSteps int
		wantLast  string
	}{
		{"what is 12*7?", all, []string{`calculator {"expression":"12*7"}`}, 2, "**12*7 = 84**"},
		{"What time is it?", all, []string{`clock {}`}, 2, "It is **21:30** (UTC) on Monday, 23 November 2026."},
		{"what time is it in Europe/Paris?", all, []string{`clock {"timezone":"Europe/Paris"}`}, 2, "It is **22:30** (Europe/Paris) on Monday, 23 November 2026."},
		{"what is 2+2, and what time is it?", all, []string{`calculator {"expression":"2+2"}`, `clock {}`}, 2, "**2+2 = 4**\n\nIt is **21:30** (UTC)"},
		{"please wait 0.05 seconds", all, []string{`wait {"seconds":0.05}`}, 2, "I waited 0.05 seconds."},
		{"what is 1/0?", all, []string{`calculator {"expression":"1/0"}`}, 2, "`calculator` could not do it: at 2: division by zero."},
		// Without the tool the demo works it out itself, in one step.
		{"what is 12*7?", []thread.ToolSpec{tool.NewClock(nil).Spec()}, nil, 1, "**12*7 = 84**"},
		{"what is 12*7?", nil, nil, 1, "**12*7 = 84**"},
		{"hello", all, nil, 1, "built-in model"},
	}
	for _, tc := range tests {
		ds, asst, steps := turn(t, tc.prompt, tc.tools, now)
		order, args, names := callsOf(ds)
		var calls []string
		for _, id := range order {
			calls = append(calls, names[id]+" "+args[id])
		}
		if strings.Join(calls, "|") != strings.Join(tc.wantCalls, "|") {
			t.Errorf("%q: calls %q, want %q", tc.prompt, calls, tc.wantCalls)
		}
		if steps != tc.wantSteps || !strings.Contains(lastText(asst), tc.wantLast) {
			t.Errorf("%q: %d steps ending %q, want %d ending with %q in it", tc.prompt, steps, lastText(asst), tc.wantSteps, tc.wantLast)
		}
		if len(order) > 0 && (asst.Parts[0].Type != "text" || !strings.Contains(asst.Parts[0].Text, "I'll")) {
			t.Errorf("%q: the turn opens with %+v, want a sentence before the calls", tc.prompt, asst.Parts[0])
		}
		for _, id := range order {
			var pieces int
			for _, d := range ds {
				if d.Kind == thread.DeltaToolCallArgs && d.ToolCallID == id {
					pieces++
				}
			}
			if pieces < 2 {
				t.Errorf("%q: call %s in %d pieces, want its arguments streamed in more than one", tc.prompt, id, pieces)
			}
		}
	}
}

func TestDemoPlan(t *testing.T) {
	t.Parallel()
	ds, res := agentStep(t, builtin.NewDemo(0), thread.ModelRequest{Messages: []thread.ModelMessage{
		{Role: checkpoint.RoleUser, Parts: []thread.ModelPart{{Type: "text", Text: "Make a plan for my move"}}}}})
	type plan struct {
		ID    string `json:"id"`
		Tasks []struct {
			Title  string `json:"title"`
			Status string `json:"status"`
		} `json:"tasks"`
	}
	var plans []plan
	for _, d := range ds {
		if d.Kind != thread.DeltaData {
			continue
		}
		var p plan
		if d.Name != "plan" || json.Unmarshal(d.Data, &p) != nil {
			t.Fatalf("data delta %s %s: want a plan", d.Name, d.Data)
		}
		plans = append(plans, p)
	}
	if len(plans) != 5 || res.StopReason != thread.StopDone || len(res.ToolCalls) != 0 {
		t.Fatalf("plans: got %d (stop %s), want 5: all pending, then one more task done each time", len(plans), res.StopReason)
	}
	for i, p := range plans {
		if p.ID != plans[0].ID || len(p.Tasks) != 4 {
			t.Fatalf("plan %d: got %+v, want the same plan of 4 tasks", i, p)
		}
		for k, task := range p.Tasks {
			want := "pending"
			if k < i {
				want = "done"
			}
			if task.Status != want {
				t.Errorf("plan %d task %d: got %s, want %s", i, k, task.Status, want)
			}
		}
	}
	if ds[0].Kind != thread.DeltaReasoning || !strings.Contains(reasoningOf(ds), "split it into four tasks") {
		t.Errorf("the plan's reply: got first delta %+v and reasoning %q, want it to open with its reasoning", ds[0], reasoningOf(ds))
	}
	if !strings.Contains(plans[0].Tasks[0].Title, "Make a plan for my move") {
		t.Errorf("first task: got %q, want it to name the goal", plans[0].Tasks[0].Title)
	}
	// The plan is shown once: as plan parts, not also as a checklist in the text.
	var text strings.Builder
	for _, d := range ds {
		if d.Kind == thread.DeltaText {
			text.WriteString(d.Text)
		}
	}
	if strings.Contains(text.String(), "- [ ]") || strings.Contains(text.String(), "Break it into small steps") {
		t.Errorf("the plan's text: got %q, want no checklist beside the plan parts", text.String())
	}
}

func TestDemoFailAndCancel(t *testing.T) {
	t.Parallel()
	var text strings.Builder
	_, err := streamText(builtin.NewDemo(0), context.Background(), userReq("/fail model_auth", 1), func(s string) error { text.WriteString(s); return nil })
	if errcode.Of(err) != errcode.ModelAuth || text.String() != "Failing as asked." {
		t.Errorf("/fail model_auth: got %q, %v; want three words and model_auth", text.String(), err)
	}

	// Paced: cancelled after the first word, it returns ctx's error and
	// sends nothing more.
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err = streamText(builtin.NewDemo(5*time.Millisecond), ctx, userReq("hello", 1), func(string) error {
		n++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || n != 1 {
		t.Errorf("cancelled demo: got %v after %d words, want context.Canceled after 1", err, n)
	}

	stop := errors.New("enough")
	_, err = streamText(builtin.NewDemo(0), context.Background(), userReq("hello", 1), func(string) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("onToken's error: got %v, want it back", err)
	}
}

// TestDemoAsksUser: with the client's ask_user tool, "ask me" makes the
// demo call it (the run then waits for the person); given the answer, the
// next step says what was answered. Without the tool it does not ask.
func TestDemoAsksUser(t *testing.T) {
	t.Parallel()
	ask := thread.ToolSpec{Name: builtin.AskUserTool, Description: "Ask the person.", Parameters: json.RawMessage(`{"type":"object"}`)}
	m := builtin.NewDemo(0)
	user := thread.ModelMessage{Role: checkpoint.RoleUser, Parts: []thread.ModelPart{{Type: "text", Text: "ask me what to do"}}}
	ds, res := agentStep(t, m, thread.ModelRequest{Tools: []thread.ToolSpec{ask}, Messages: []thread.ModelMessage{user}})
	if res.StopReason != thread.StopToolCalls || len(res.ToolCalls) != 1 || res.ToolCalls[0].Name != builtin.AskUserTool {
		t.Fatalf("first step: stop %q, calls %+v; want one %s call", res.StopReason, res.ToolCalls, builtin.AskUserTool)
	}
	var args struct {
		Question string   `json:"question"`
		Choices  []string `json:"choices"`
	}
	if err := json.Unmarshal([]byte(res.ToolCalls[0].ArgsText), &args); err != nil || args.Question == "" || len(args.Choices) == 0 {
		t.Errorf("ask_user arguments: got %s (%v), want a question and choices", res.ToolCalls[0].ArgsText, err)
	}
	if _, _, names := callsOf(ds); len(names) != 1 {
		t.Errorf("streamed calls: got %v, want one", names)
	}
	c := res.ToolCalls[0]
	c.Result = json.RawMessage(`"Make a plan"`)
	asst := thread.ModelMessage{Role: checkpoint.RoleAssistant, Parts: []thread.ModelPart{{Type: "tool-call", Call: &c}}}
	ds, res = agentStep(t, m, thread.ModelRequest{Tools: []thread.ToolSpec{ask}, Messages: []thread.ModelMessage{user, asst}})
	var text strings.Builder
	for _, d := range ds {
		if d.Kind == thread.DeltaText {
			text.WriteString(d.Text)
		}
	}
	if res.StopReason != thread.StopDone || !strings.Contains(text.String(), "You answered: **Make a plan**") {
		t.Errorf("second step: stop %q, text %q; want the answer repeated", res.StopReason, text.String())
	}
	_, asst2, _ := turn(t, "ask me what to do", nil, time.Now())
	if strings.Contains(lastText(asst2), "need to know") {
		t.Errorf("without ask_user: got %q, want no question", lastText(asst2))
	}
}

func reasoningOf(ds []thread.Delta) string {
	var b strings.Builder
	for _, d := range ds {
		if d.Kind == thread.DeltaReasoning {
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

// TestDemoFiles: asked to write files, the demo lists them in a `files`
// data part, each with a name, a path and a data: URL holding its content.
func TestDemoFiles(t *testing.T) {
	t.Parallel()
	ds, res := agentStep(t, builtin.NewDemo(0), thread.ModelRequest{Messages: []thread.ModelMessage{
		{Role: checkpoint.RoleUser, Parts: []thread.ModelPart{{Type: "text", Text: "write me some files"}}}}})
	var files []struct{ Filepath, Filename, URL string }
	for _, d := range ds {
		if d.Kind == thread.DeltaData && d.Name == "files" {
			if err := json.Unmarshal(d.Data, &files); err != nil {
				t.Fatalf("files part %s: %v", d.Data, err)
			}
		}
	}
	if res.StopReason != thread.StopDone || len(files) != 2 {
		t.Fatalf("got stop %q and files %+v, want two files", res.StopReason, files)
	}
	for _, f := range files {
		if f.Filename == "" || !strings.HasSuffix(f.Filepath, f.Filename) || !strings.HasPrefix(f.URL, "data:text/") {
			t.Errorf("file %+v: want a name, its path and a data: URL", f)
		}
	}
}

// TestDemoRegenerateDiffers: a regenerated reply is the next run of the
// thread (Call one more), and its text differs from the reply before it.
func TestDemoRegenerateDiffers(t *testing.T) {
	t.Parallel()
	for _, prompt := range []string{"hello", "tell me something", "Hi there"} {
		for call := int64(1); call <= 6; call++ {
			got, again := demoChat(t, prompt, call), demoChat(t, prompt, call+1)
			if got == again {
				t.Errorf("%q: calls %d and %d gave the same reply", prompt, call, call+1)
			}
		}
	}
}

// TestDemoDelegates: asked to research three options in parallel with
// the delegate tool offered, the demo makes three delegate calls in one
// step; a sub-agent's task gets a short answer about its option; given
// the three answers it sums them up. Without delegate it does not call it.
func TestDemoDelegates(t *testing.T) {
	t.Parallel()
	m := builtin.NewDemo(0)
	specs := []thread.ToolSpec{{Name: "delegate"}}
	user := func(text string) []thread.ModelMessage {
		return []thread.ModelMessage{{Role: checkpoint.RoleUser, Parts: []thread.ModelPart{{Type: "text", Text: text}}}}
	}
	ds, res := agentStep(t, m, thread.ModelRequest{Tools: specs, Messages: user("Research three options in parallel")})
	order, args, names := callsOf(ds)
	if len(order) != 3 || len(res.ToolCalls) != 3 || res.StopReason != thread.StopToolCalls {
		t.Fatalf("calls: got %v (%d returned, %s), want three", order, len(res.ToolCalls), res.StopReason)
	}
	asst := thread.ModelMessage{Role: checkpoint.RoleAssistant}
	for _, id := range order {
		var in struct{ Task, Title string }
		if names[id] != "delegate" || json.Unmarshal([]byte(args[id]), &in) != nil || in.Title == "" {
			t.Fatalf("call %s: %s %s, want delegate with a task and a title", id, names[id], args[id])
		}
		cds, _ := agentStep(t, m, thread.ModelRequest{Tools: specs, Messages: user(in.Task)})
		var answer strings.Builder
		for _, d := range cds {
			if d.Kind != thread.DeltaText {
				t.Fatalf("the sub-agent of %q: got %+v, want text only", in.Task, d)
			}
			answer.WriteString(d.Text)
		}
		if !strings.Contains(answer.String(), in.Title) {
			t.Fatalf("the sub-agent of %q: got %q, want its option named", in.Task, answer.String())
		}
		result, _ := json.Marshal(answer.String())
		asst.Parts = append(asst.Parts, thread.ModelPart{Type: "tool-call", Call: &thread.ToolCall{ID: id, Name: "delegate", ArgsText: args[id], Result: result}})
	}
	ds, res = agentStep(t, m, thread.ModelRequest{Tools: specs, Messages: append(user("Research three options in parallel"), asst)})
	var sum strings.Builder
	for _, d := range ds {
		sum.WriteString(d.Text)
	}
	if res.StopReason != thread.StopDone || !strings.Contains(sum.String(), "Summary: 3 sub-agents") || !strings.Contains(sum.String(), "SQLite") {
		t.Fatalf("summary: got %q (%s)", sum.String(), res.StopReason)
	}
	ds, res = agentStep(t, m, thread.ModelRequest{Messages: user("Research three options in parallel")})
	if _, _, names := callsOf(ds); len(names) != 0 || len(res.ToolCalls) != 0 {
		t.Fatalf("without delegate: got calls %v", names)
	}
}
