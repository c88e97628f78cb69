package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/thread"
)

var _ thread.Model = (*Demo)(nil)

// Demo is the built-in model as a demo: deterministic and offline, it
// answers in readable Markdown that responds to the message by looking for
// a few patterns (it understands nothing). Given tools it calls calculator
// for arithmetic and clock for the time, and answers with their results in
// the next step; without them it computes arithmetic at once. Asked for a
// plan it sends plan data parts.
//
// The same request gives the same reply; a different Call (a regenerated
// reply) may open with other words. "/fail <code>" fails as [Builtin]
// does. With Delay > 0 each word is sent Delay after the one before, on
// its Pacer's goroutine, so onToken and onDelta must not block.
type Demo struct {
	Name  string // ModelResult.Model; BuiltinName when empty
	Delay time.Duration
	// Pacer paces its words when Delay is set (nil: each stream is paced
	// on its caller's goroutine).
	Pacer *Pacer
}

// NewDemo returns the demo model, sending a word every delay (0: at once).
func NewDemo(delay time.Duration) *Demo { return &Demo{Delay: max(delay, 0)} }

func (m *Demo) name() string {
	if m.Name == "" {
		return BuiltinName
	}
	return m.Name
}

// Stream implements thread.Model. Errors: ctx.Err() when ctx ends, a model
// *errcode.Error for "/fail", onDelta's error as is.
func (m *Demo) Stream(ctx context.Context, req thread.ModelRequest, onDelta func(thread.Delta) error) (thread.ModelResult, error) {
	if err := ctx.Err(); err != nil {
		return thread.ModelResult{}, err
	}
	prompt := lastUserText(req)
	plan := demoReply(req, prompt)
	res := thread.ModelResult{Model: m.name(), PromptTokens: promptTokens(req), StopReason: thread.StopDone}
	if code := failCode(prompt); code != "" {
		plan = []thread.Delta{{Kind: thread.DeltaText, Text: "Failing"}, {Kind: thread.DeltaText, Text: " as"}, {Kind: thread.DeltaText, Text: " asked."}}
		if err := m.send(ctx, plan, onDelta); err != nil {
			return thread.ModelResult{}, err
		}
		res.CompletionTokens = len(plan)
		return res, &errcode.Error{Code: code, Message: "the built-in model was asked to fail (/fail " + string(code) + ")"}
	}
	if err := m.send(ctx, plan, onDelta); err != nil {
		return thread.ModelResult{}, err
	}
	res.CompletionTokens = len(plan)
	calls := map[string]*thread.ToolCall{}
	for _, d := range plan {
		if d.Kind != thread.DeltaToolCallArgs {
			continue
		}
		if c := calls[d.ToolCallID]; c != nil {
			c.ArgsText += d.ArgsText
			continue
		}
		calls[d.ToolCallID] = &thread.ToolCall{ID: d.ToolCallID, Name: d.ToolName, ArgsText: d.ArgsText}
		res.ToolCalls = append(res.ToolCalls, thread.ToolCall{ID: d.ToolCallID})
	}
	for i := range res.ToolCalls {
		res.ToolCalls[i] = *calls[res.ToolCalls[i].ID]
	}
	if len(res.ToolCalls) > 0 {
		res.StopReason = thread.StopToolCalls
	}
	return res, nil
}

// send streams the deltas, paced when the model has a delay.
func (m *Demo) send(ctx context.Context, ds []thread.Delta, onDelta func(thread.Delta) error) error {
	if m.Delay > 0 {
		return paceWith(ctx, m.Pacer, len(ds), m.Delay, func(i int) error { return onDelta(ds[i]) })
	}
	for _, d := range ds {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := onDelta(d); err != nil {
			return err
		}
	}
	return nil
}

var (
	reTime  = regexp.MustCompile(`(?i)\b(what time|the time|time is it|current time|what day|the date|today's date|what's the date|clock)\b`)
	rePlan  = regexp.MustCompile(`(?i)\bplan(ning|s)?\b`)
	reCode  = regexp.MustCompile(`(?i)\b(code|function|program|script|snippet|python|golang|javascript|typescript|rust|sql|bash)\b`)
	reFiles = regexp.MustCompile(`(?i)\b(write|create|make|save)\b.*\bfiles?\b`)
	reTable = regexp.MustCompile(`(?i)\b(table|compare|comparison)\b`)
	reList  = regexp.MustCompile(`(?i)\b(list|ideas|bullet|bullets|items)\b`)
	reArith = regexp.MustCompile(`[-+*/%^().\d\s]*\d[-+*/%^().\d\s]*`)
	reOp    = regexp.MustCompile(`\d\s*[)]*\s*(\*\*|[-+*/%^])\s*[(]*\s*-?\s*[\d.(]`)
	reAsk   = regexp.MustCompile(`(?i)\bask me\b`)
	// reDelegate is a request for sub-agents; reOption a sub-agent's task
	// as delegateReply words it.
	reDelegate = regexp.MustCompile(`(?i)\b(research|compare|explore|investigate)\b.*\bin parallel\b`)
	reOption   = regexp.MustCompile(`(?i)^look into (.+?) as an option for (.+?)\.`)
	reWait     = regexp.MustCompile(`(?i)\bwait (\d{1,2}(\.\d+)?) ?(s|sec|secs|seconds?)\b`)
	reZone     = regexp.MustCompile(`\b[A-Z][A-Za-z_]+/[A-Z][A-Za-z_]+(/[A-Z][A-Za-z_]+)?\b`)
)

// arithmetic returns the arithmetic expression in a message, if any: the
// longest run of numbers and operators with an operator between numbers.
func arithmetic(s string) string {
	best := ""
	for _, m := range reArith.FindAllString(s, -1) {
		m = strings.Trim(strings.TrimSpace(m), ".")
		if reOp.MatchString(m) && len(m) > len(best) {
			best = m
		}
	}
	return best
}

// demoReply is the whole reply to a request, as deltas.
func demoReply(req thread.ModelRequest, prompt string) []thread.Delta {
	tools := map[string]bool{}
	for _, t := range req.Tools {
		tools[t.Name] = true
	}
	if calls := pendingAnswers(req); calls != nil {
		return words(answerText(calls))
	}
	if out := askOrDelegate(req, tools, prompt); out != nil {
		return out
	}
	expr := arithmetic(prompt)
	wantTime := reTime.MatchString(prompt)
	calcExpr, clockZone := "", ""
	if expr != "" && tools["calculator"] {
		calcExpr = expr
	}
	if wantTime && tools["clock"] {
		clockZone = "UTC"
		if z := reZone.FindString(prompt); z != "" {
			clockZone = z
		}
	}
	waitFor := ""
	if m := reWait.FindStringSubmatch(prompt); m != nil && tools["wait"] {
		waitFor = m[1]
	}
	if calcExpr != "" || clockZone != "" || waitFor != "" {
		return toolCallReply(seed(prompt, req.Call), calcExpr, clockZone, waitFor)
	}
	switch {
	case reFiles.MatchString(prompt):
		return filesReply(prompt)
	case rePlan.MatchString(prompt):
		return planReply(prompt, req.Call)
	case expr != "":
		return words(arithmeticText(expr))
	case wantTime:
		return words("You asked about the time. I have no clock of my own: in a run with tools I call the `clock` tool " +
			"and answer with what it says. You asked: " + echo(prompt))
	case reCode.MatchString(prompt):
		return words(codeText(prompt))
	case reTable.MatchString(prompt):
		return words(tableText(prompt))
	case reList.MatchString(prompt):
		return words(listText(prompt))
	}
	return words(introText(prompt, req.Call))
}

// askOrDelegate is the reply that asks the person (ask_user), hands
// options to sub-agents (delegate), or answers as such a sub-agent; nil
// for none of them.
func askOrDelegate(req thread.ModelRequest, tools map[string]bool, prompt string) []thread.Delta {
	switch {
	case tools[AskUserTool] && reAsk.MatchString(prompt):
		return askReply(seed(prompt, req.Call), prompt)
	case tools[DelegateTool] && reDelegate.MatchString(prompt):
		return delegateReply(seed(prompt, req.Call), prompt)
	}
	if m := reOption.FindStringSubmatch(prompt); m != nil {
		return words(optionText(m[1], m[2]))
	}
	return nil
}

// AskUserTool is the client tool the demo calls when asked to ask: the
// web app declares it and lets the person answer in a form.
const AskUserTool = "ask_user"

// askReply is a step that asks the person a question through the client's
// ask_user tool; the run waits (requires_action) for the answer.
func askReply(seed uint64, prompt string) []thread.Delta {
	out := words("Before I go on with " + echo(prompt) + ", I need to know one thing.\n\n")
	b, _ := json.Marshal(map[string]any{"question": "Which should I do first?", "choices": []string{"Make a plan", "Do the sums"}})
	id := fmt.Sprintf("call_%012x_ask", seed&0xffffffffffff)
	return append(out, thread.Delta{Kind: thread.DeltaToolCallArgs, ToolCallID: id, ToolName: AskUserTool, ArgsText: string(b)})
}

// toolCallReply is a step that calls calculator on expr, clock in zone
// ("UTC" sends no argument) and wait for seconds ("" for none of each), with
// a sentence before.
func toolCallReply(seed uint64, expr, zone, seconds string) []thread.Delta {
	var lead []string
	if expr != "" {
		lead = append(lead, "I'll work out `"+expr+"` with the calculator")
	}
	if zone != "" {
		lead = append(lead, "I'll ask the clock for the time")
	}
	if seconds != "" {
		lead = append(lead, "I'll wait "+seconds+" seconds with the wait tool")
	}
	out := words(strings.Join(lead, ", and ") + ".\n\n")
	n := 0
	call := func(name string, args map[string]string) {
		id := fmt.Sprintf("call_%012x_%d", seed&0xffffffffffff, n)
		n++
		b, _ := json.Marshal(args)
		// The arguments in two pieces, as a provider streams them.
		half := len(b) / 2
		out = append(out, thread.Delta{Kind: thread.DeltaToolCallArgs, ToolCallID: id, ToolName: name, ArgsText: string(b[:half])},
			thread.Delta{Kind: thread.DeltaToolCallArgs, ToolCallID: id, ToolName: name, ArgsText: string(b[half:])})
	}
	if expr != "" {
		call("calculator", map[string]string{"expression": expr})
	}
	if zone != "" {
		args := map[string]string{}
		if zone != "UTC" {
			args["timezone"] = zone
		}
		call("clock", args)
	}
	if seconds != "" {
		// A number, not a string: json.RawMessage keeps it as written.
		id := fmt.Sprintf("call_%012x_%d", seed&0xffffffffffff, n)
		out = append(out, thread.Delta{Kind: thread.DeltaToolCallArgs, ToolCallID: id, ToolName: "wait", ArgsText: `{"seconds":`},
			thread.Delta{Kind: thread.DeltaToolCallArgs, ToolCallID: id, ToolName: "wait", ArgsText: seconds + "}"})
	}
	return out
}

// pendingAnswers returns the tool calls of the last step of the turn in
// progress when they are the last thing in it (the model is called again
// with their results), else nil.
func pendingAnswers(req thread.ModelRequest) []*thread.ToolCall {
	if len(req.Messages) == 0 {
		return nil
	}
	last := &req.Messages[len(req.Messages)-1]
	if last.Role != checkpoint.RoleAssistant {
		return nil
	}
	var calls []*thread.ToolCall
	for i := len(last.Parts) - 1; i >= 0; i-- {
		p := last.Parts[i]
		if p.Type == thread.PartToolCall && p.Call != nil {
			calls = append([]*thread.ToolCall{p.Call}, calls...)
			continue
		}
		if (p.Type == thread.PartText && strings.TrimSpace(p.Text) == "") || p.Type == thread.PartReasoning {
			continue
		}
		break
	}
	if len(calls) == 0 {
		return nil
	}
	return calls
}

// answerText answers with the results of the calls.
func answerText(calls []*thread.ToolCall) string {
	var b strings.Builder
	for _, c := range calls {
		var res string
		if c.Result != nil {
			if json.Unmarshal(c.Result, &res) != nil {
				res = string(c.Result)
			}
		}
		switch {
		case c.Result == nil:
			fmt.Fprintf(&b, "I got no answer from `%s`.", c.Name)
		case c.IsError:
			fmt.Fprintf(&b, "`%s` could not do it: %s.", c.Name, strings.TrimSuffix(res, "."))
		case c.Name == "calculator":
			var in struct {
				Expression string `json:"expression"`
			}
			_ = json.Unmarshal([]byte(c.ArgsText), &in)
			fmt.Fprintf(&b, "**%s = %s**", in.Expression, res)
		case c.Name == "clock":
			b.WriteString(clockText(c.Result))
		case c.Name == DelegateTool:
			var in struct {
				Title string `json:"title"`
			}
			_ = json.Unmarshal([]byte(c.ArgsText), &in)
			fmt.Fprintf(&b, "- **%s** (from its sub-agent): %s", in.Title, res)
		case c.Name == AskUserTool:
			fmt.Fprintf(&b, "You answered: **%s**. Thank you, that is what I needed.", strings.TrimSuffix(res, "."))
		case c.Name == "wait":
			var w struct {
				Seconds float64 `json:"waited_seconds"`
			}
			_ = json.Unmarshal(c.Result, &w)
			fmt.Fprintf(&b, "I waited %s seconds.", tool.FormatNumber(w.Seconds))
		default:
			fmt.Fprintf(&b, "`%s` answered: %s", c.Name, res)
		}
		b.WriteString("\n\n")
	}
	if calls[0].Name == DelegateTool {
		fmt.Fprintf(&b, "Summary: %d sub-agents worked in parallel, each in a thread of its own; their findings are above. "+
			"For a small deployment the first option is the safe default.", len(calls))
		return b.String()
	}
	b.WriteString("That is what the tools said; I only pass their answers on.")
	return b.String()
}

func clockText(result json.RawMessage) string {
	var cr tool.ClockResult
	if json.Unmarshal(result, &cr) != nil {
		return "The clock answered: " + string(result)
	}
	t, err := time.Parse(time.RFC3339, cr.Time)
	if err != nil {
		return "The clock says " + cr.Time + "."
	}
	return fmt.Sprintf("It is **%s** (%s) on %s, %s.", t.Format("15:04"), cr.Timezone, t.Weekday(), t.Format("2 January 2006"))
}

// echo quotes the message on one line, cut to 200 characters.
func echo(prompt string) string {
	s := strings.Join(strings.Fields(prompt), " ")
	if utf8.RuneCountInString(s) > 200 {
		r := []rune(s)
		s = string(r[:200]) + "…"
	}
	s = strings.ReplaceAll(s, "`", "'")
	if s == "" {
		return "nothing (an empty message)."
	}
	return "“" + s + "”"
}

func arithmeticText(expr string) string {
	v, err := tool.Evaluate(expr)
	if err != nil {
		return fmt.Sprintf("`%s` looks like arithmetic, but it does not work out: %s.", expr, err)
	}
	return fmt.Sprintf("**%s = %s**\n\nIn a run with tools I would ask the `calculator` tool instead of working it out myself.", expr, tool.FormatNumber(v))
}

// planTasks are the tasks of a plan for what was asked.
func planTasks(prompt string) []string {
	goal := strings.Join(strings.Fields(prompt), " ")
	if utf8.RuneCountInString(goal) > 60 {
		goal = string([]rune(goal)[:60]) + "…"
	}
	return []string{"Understand the goal: " + goal, "Break it into small steps", "Do each step and check it", "Sum up what was done"}
}

type planTask struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Status string `json:"status"` // pending | done
}

type planData struct {
	ID    string     `json:"id"`
	Title string     `json:"title"`
	Tasks []planTask `json:"tasks"`
}

// planReply sends the plan as a data part with every task pending, then
// for each task a sentence and the plan again with that task done: each
// plan part is the whole plan, the latest one of an id wins.
func planReply(prompt string, call int64) []thread.Delta {
	titles := planTasks(prompt)
	p := planData{ID: fmt.Sprintf("plan_%012x", seed(prompt, call)&0xffffffffffff), Title: "Plan"}
	for i, t := range titles {
		p.Tasks = append(p.Tasks, planTask{ID: fmt.Sprint(i + 1), Title: t, Status: "pending"})
	}
	data := func() []thread.Delta {
		b, _ := json.Marshal(p)
		return []thread.Delta{{Kind: thread.DeltaData, Name: "plan", Data: b}}
	}
	intro := "Here is a plan for what you asked, " + echo(prompt) + ". I tick each task off as I go.\n\n"
	out := thoughts("The request asks for a plan. I'll split it into four tasks, send them as a checklist, " +
		"and tick each one off as I finish it.")
	out = append(out, words(intro)...)
	out = append(out, data()...)
	steps := []string{"I read the request again and noted what done looks like.", "I cut the work into steps small enough to check.",
		"I would do each step now; as a demo, I only tick it off.", "Every task is done, and this is the summary."}
	for i := range p.Tasks {
		sep := "\n"
		if i == len(p.Tasks)-1 {
			sep = ""
		}
		out = append(out, words(fmt.Sprintf("%d. %s%s", i+1, steps[i], sep))...)
		p.Tasks[i].Status = "done"
		out = append(out, data()...)
	}
	return out
}

func codeText(prompt string) string {
	l := strings.ToLower(prompt)
	lang, code := "go", "package main\n\nimport \"fmt\"\n\nfunc main() {\n\ta, b := 0, 1\n\tfor i := 0; i < 10; i++ {\n\t\tfmt.Println(a)\n\t\ta, b = b, a+b\n\t}\n}"
	switch {
	case strings.Contains(l, "python"):
		lang, code = "python", "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        yield a\n        a, b = b, a + b\n\nprint(list(fibonacci(10)))"
	case strings.Contains(l, "typescript"):
		lang, code = "typescript", "function* fibonacci(n: number): Generator<number> {\n  let [a, b] = [0, 1];\n  for (let i = 0; i < n; i++) {\n    yield a;\n    [a, b] = [b, a + b];\n  }\n}\n\nconsole.log([...fibonacci(10)]);"
	case strings.Contains(l, "javascript"):
		lang, code = "javascript", "function* fibonacci(n) {\n  let [a, b] = [0, 1];\n  for (let i = 0; i < n; i++) {\n    yield a;\n    [a, b] = [b, a + b];\n  }\n}\n\nconsole.log([...fibonacci(10)]);"
	case strings.Contains(l, "rust"):
		lang, code = "rust", "fn main() {\n    let (mut a, mut b) = (0u64, 1u64);\n    for _ in 0..10 {\n        println!(\"{a}\");\n        (a, b) = (b, a + b);\n    }\n}"
	case strings.Contains(l, "sql"):
		lang, code = "sql", "WITH RECURSIVE fib(n, a, b) AS (\n  SELECT 1, 0, 1\n  UNION ALL\n  SELECT n + 1, b, a + b FROM fib WHERE n < 10\n)\nSELECT a FROM fib;"
	case strings.Contains(l, "bash") || strings.Contains(l, "shell"):
		lang, code = "bash", "a=0 b=1\nfor i in $(seq 10); do\n  echo \"$a\"\n  t=$((a + b)); a=$b; b=$t\ndone"
	}
	return "You asked for code: " + echo(prompt) + " I can only show one example, the first ten Fibonacci numbers in " + lang + ":\n\n" +
		"```" + lang + "\n" + code + "\n```\n\nA real model would write the code you asked for; see how to plug one in by asking me anything else."
}

func tableText(prompt string) string {
	return "You asked: " + echo(prompt) + " Here is the table I know, the models Threadline can call:\n\n" +
		"| provider | `run_config.model` | what to set |\n" +
		"|---|---|---|\n" +
		"| built-in (this demo) | `builtin` | nothing |\n" +
		"| OpenAI and compatible servers | `openai:gpt-4o` | `OPENAI_API_KEY` (and `OPENAI_BASE_URL`) |\n" +
		"| Anthropic | `anthropic:claude-sonnet-4-5` | `ANTHROPIC_API_KEY` |\n" +
		"| Google AI | `googleai:gemini-2.0-flash` | `GOOGLE_API_KEY` |\n" +
		"| Ollama | `ollama:llama3.2` | `OLLAMA_HOST` |"
}

func listText(prompt string) string {
	fields := strings.Fields(prompt)
	longest := ""
	for _, f := range fields {
		f = strings.Trim(f, ".,;:!?\"'()")
		if utf8.RuneCountInString(f) > utf8.RuneCountInString(longest) {
			longest = f
		}
	}
	kind := "a statement"
	if strings.HasSuffix(strings.TrimSpace(prompt), "?") {
		kind = "a question"
	}
	return "Here is a list, as you asked. It is about your message, " + echo(prompt) + ", since that is all I know:\n\n" +
		fmt.Sprintf("- It has **%d** words.\n", len(fields)) +
		fmt.Sprintf("- Its longest word is *%s*.\n", strings.ReplaceAll(longest, "*", "")) +
		"- It reads as " + kind + ".\n" +
		"- A real model would make a better list; ask me anything else to see how to plug one in."
}

var demoGreetings = []string{
	"Hello! I'm Threadline's **built-in model**",
	"Hi there. You are talking to Threadline's **built-in model**",
	"Thanks for your message. This is Threadline's **built-in model**",
}

func introText(prompt string, call int64) string {
	// The run's sequence turns the greetings round, so a regenerated reply
	// (the next run) never opens as the one before it did.
	n := uint64(len(demoGreetings))
	greet := demoGreetings[(seed(prompt, 0)%n+uint64(call)%n)%n]
	return greet + ": a small demo that runs offline, with no keys and no network. I understand nothing; " +
		"I look for a few patterns in what you write and answer the same way every time.\n\n" +
		"You asked: " + echo(prompt) + "\n\n" +
		"Here is what I can show you:\n\n" +
		"- **Arithmetic**: ask `what is 12*7?` and, when the run has tools, I call the `calculator` tool and answer with its result.\n" +
		"- **Time**: ask `what time is it?` and I call the `clock` tool.\n" +
		"- **A plan**: ask me to `plan a trip` and I lay out a checklist whose tasks tick off as I go.\n" +
		"- **Code**: ask for `code in Python` and I answer with a code block.\n" +
		"- **A table**: ask for `a table of models`.\n" +
		"- **Errors**: send `/fail model_error` and I fail the way a provider does.\n\n" +
		"To talk to a real model, set a provider's key and name its model in `run_config.model`: for example start " +
		"Threadline with `OPENAI_API_KEY=sk-… make run` and send `\"run_config\": {\"model\": \"openai:gpt-4o\"}`. " +
		"`model/README.md` lists every provider, including local ones (Ollama, vLLM)."
}

// demoFile is an entry of a `files` data part: a file the turn produced.
type demoFile struct {
	Filepath string `json:"filepath"`
	Filename string `json:"filename"`
	URL      string `json:"url"`
}

// filesReply "writes" two small files: their content travels in data: URLs
// (the demo has no storage of its own), listed in a `files` data part.
func filesReply(prompt string) []thread.Delta {
	notes := "# Notes\n\nYou asked: " + prompt + "\n"
	csv := "task,status\nread the request,done\nwrite the files,done\n"
	files := []demoFile{
		{Filepath: "/workspace/notes.md", Filename: "notes.md", URL: "data:text/markdown;charset=utf-8," + url.PathEscape(notes)},
		{Filepath: "/workspace/tasks.csv", Filename: "tasks.csv", URL: "data:text/csv;charset=utf-8," + url.PathEscape(csv)},
	}
	b, _ := json.Marshal(files)
	out := words("I wrote two files for what you asked, " + echo(prompt) + ": the notes and a task list. ")
	out = append(out, thread.Delta{Kind: thread.DeltaData, Name: "files", Data: b})
	return append(out, words("As a demo I keep them in the links themselves; a real agent's tools would write them to its workspace.")...)
}

// thoughts is text as reasoning deltas, word by word.
func thoughts(text string) []thread.Delta {
	out := words(text)
	for i := range out {
		out[i].Kind = thread.DeltaReasoning
	}
	return out
}

// words cuts text into word deltas: each word with the spaces after it
// (text starting with spaces keeps them on the first).
func words(text string) []thread.Delta {
	var out []thread.Delta
	start := 0
	inSpace := true
	for i, r := range text {
		space := r == ' ' || r == '\n' || r == '\t'
		if !space && inSpace && i > start && strings.TrimSpace(text[start:i]) != "" {
			out = append(out, thread.Delta{Kind: thread.DeltaText, Text: text[start:i]})
			start = i
		}
		inSpace = space
	}
	if start < len(text) {
		out = append(out, thread.Delta{Kind: thread.DeltaText, Text: text[start:]})
	}
	return out
}

// DelegateTool is the engine's built-in tool that starts a sub-agent
// (thread/engine/internal/runner.DelegateTool).
const DelegateTool = "delegate"

// demoOptions are the three options the demo hands to sub-agents.
var demoOptions = []string{"Postgres", "SQLite", "an embedded key-value store"}

// delegateReply is a step that hands three options to three sub-agents
// at once, one delegate call each, with a sentence before.
func delegateReply(seed uint64, prompt string) []thread.Delta {
	topic := "storing chat history"
	if m := reTopic.FindStringSubmatch(prompt); m != nil {
		topic = strings.TrimSpace(m[1])
	}
	out := words("I'll hand each of three options to a sub-agent of its own; they work in parallel.\n\n")
	for i, o := range demoOptions {
		id := fmt.Sprintf("call_%012x_sub%d", seed&0xffffffffffff, i)
		b, _ := json.Marshal(map[string]string{"task": "Look into " + o + " as an option for " + topic + ". Answer in two sentences.",
			"title": o})
		half := len(b) / 2
		out = append(out, thread.Delta{Kind: thread.DeltaToolCallArgs, ToolCallID: id, ToolName: DelegateTool, ArgsText: string(b[:half])},
			thread.Delta{Kind: thread.DeltaToolCallArgs, ToolCallID: id, ToolName: DelegateTool, ArgsText: string(b[half:])})
	}
	return out
}

var reTopic = regexp.MustCompile(`(?i)\bin parallel for ([^.?!]+)`)

// optionText is a sub-agent's short answer about one option.
func optionText(option, topic string) string {
	return fmt.Sprintf("**%s** for %s: it is simple to run and well understood, and it does the job for most teams. "+
		"One drawback: it needs care as the load grows, so measure before you commit.", option, topic)
}
