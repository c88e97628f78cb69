package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// Markdown returns one branch of the thread as an audit trail to read and
// keep: a YAML front matter block (thread id, title, created, models, head
// checkpoint), then each turn of the path from the root to the branch's
// leaf: the user's message, the reply's reasoning folded in <details>, a
// plan as a checklist, every tool call with its arguments and result as
// fenced JSON (errors marked), files and sources as lists, and per run its
// model, start, duration, usage and final status.
//
// head picks the branch: a message id (a leaf, or a message above one:
// its most recent leaf), or uuid.Nil for the thread's own head. It returns
// not_found when head is not a message of the thread. The same thread and
// head always give the same bytes.
func Markdown(x *thread.ThreadExport, head uuid.UUID) ([]byte, error) {
	tree, err := checkpoint.NewTree(x.Nodes)
	if err != nil {
		return nil, fmt.Errorf("thread %s: %w", x.Thread.ID, err)
	}
	if head == uuid.Nil {
		head = x.Thread.HeadID
	} else if tree.Get(head) == nil {
		return nil, errcode.New(errcode.NotFound, "message %s is not in thread %s", head, x.Thread.ID)
	}
	leaf := tree.ResolveHead(head)
	var path []*checkpoint.Node
	if leaf != uuid.Nil {
		path = checkpoint.CollapseTurns(tree.PathRefs(leaf))
	}
	runs := map[uuid.UUID][]*thread.Run{} // by the message they wrote
	for _, r := range x.Runs {
		runs[r.MessageID] = append(runs[r.MessageID], r)
	}
	var b bytes.Buffer
	frontMatter(&b, x, tree, path, runs, leaf)
	title := "Untitled thread"
	if x.Thread.Title != nil && strings.TrimSpace(*x.Thread.Title) != "" {
		title = oneLine(*x.Thread.Title)
	}
	fmt.Fprintf(&b, "\n# %s\n", title)
	for i, n := range path {
		wire := tree.WireID(n.ID)
		writeTurn(&b, i+1, n, wire, runs[wire])
	}
	return b.Bytes(), nil
}

// frontMatter writes the YAML block; strings are JSON-quoted, which YAML
// reads as double-quoted scalars.
func frontMatter(b *bytes.Buffer, x *thread.ThreadExport, tree *checkpoint.Tree, path []*checkpoint.Node, runs map[uuid.UUID][]*thread.Run, leaf uuid.UUID) {
	b.WriteString("---\n")
	fmt.Fprintf(b, "format: %s.markdown\nversion: %d\n", Format, Version)
	fmt.Fprintf(b, "thread_id: %s\n", x.Thread.ID)
	if x.Thread.Title != nil {
		fmt.Fprintf(b, "title: %s\n", quote(*x.Thread.Title))
	} else {
		b.WriteString("title: null\n")
	}
	fmt.Fprintf(b, "created: %s\n", stamp(x.Thread.CreatedAt))
	var models []string
	for _, n := range path {
		for _, r := range runs[tree.WireID(n.ID)] {
			if r.Model != "" && !slices.Contains(models, r.Model) {
				models = append(models, r.Model)
			}
		}
	}
	for _, m := range importedModels(x.Thread.Metadata) {
		if !slices.Contains(models, m) {
			models = append(models, m)
		}
	}
	b.WriteString("models: [")
	for i, m := range models {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quote(m))
	}
	b.WriteString("]\n")
	if leaf != uuid.Nil {
		fmt.Fprintf(b, "head: %s\n", leaf)
	} else {
		b.WriteString("head: null\n")
	}
	fmt.Fprintf(b, "messages: %d\n", len(path))
	b.WriteString("---\n")
}

// importedModels reads metadata.import.models, where an import from
// another product keeps the models its messages name.
func importedModels(md json.RawMessage) []string {
	var v struct {
		Import struct {
			Models []string `json:"models"`
		} `json:"import"`
	}
	_ = json.Unmarshal(md, &v) // other metadata: no models
	return v.Import.Models
}

func writeTurn(b *bytes.Buffer, k int, n *checkpoint.Node, wire uuid.UUID, runs []*thread.Run) {
	role := strings.ToUpper(string(n.Role[:1])) + string(n.Role[1:])
	fmt.Fprintf(b, "\n## %d. %s\n\n", k, role)
	fmt.Fprintf(b, "<sub>message `%s` · checkpoint `%s` · %s</sub>\n", wire, n.ID, stamp(n.CreatedAt))
	w := partWriter{b: b, parts: n.Content, plans: lastPlans(n.Content)}
	for i := range n.Content {
		w.part(&n.Content[i])
	}
	w.flushLists()
	if len(n.Attachments) > 0 {
		b.WriteString("\n**Attachments**\n\n")
		for _, a := range n.Attachments {
			fmt.Fprintf(b, "- %s (%s, %s, %d bytes) `%s`\n", mdLink(a.Name, a.URL), a.Type, a.ContentType, a.Size, a.ID)
		}
	}
	if n.Status != nil && n.Status.Type != "complete" {
		fmt.Fprintf(b, "\n**Status:** %s", n.Status.Type)
		if n.Status.Reason != "" {
			fmt.Fprintf(b, " (%s)", n.Status.Reason)
		}
		if n.Status.Error != "" {
			fmt.Fprintf(b, ": %s", oneLine(n.Status.Error))
		}
		b.WriteString("\n")
	}
	if len(runs) > 0 {
		b.WriteString("\n**Runs**\n\n")
		for _, r := range runs {
			writeRun(b, r)
		}
	}
}

func writeRun(b *bytes.Buffer, r *thread.Run) {
	fmt.Fprintf(b, "- run `%s`: model `%s`, started %s", r.ID, r.Model, stamp(r.CreatedAt))
	if r.FinishedAt != nil {
		d := r.FinishedAt.Sub(r.CreatedAt)
		fmt.Fprintf(b, ", duration %s s", strconv.FormatFloat(d.Seconds(), 'f', 3, 64))
	}
	if u := r.Usage; u != nil {
		fmt.Fprintf(b, ", usage %d prompt + %d completion tokens", u.PromptTokens, u.CompletionTokens)
	}
	fmt.Fprintf(b, ", status **%s**", r.Status)
	if r.Error != nil {
		fmt.Fprintf(b, " (`%s`: %s)", r.Error.Code, oneLine(r.Error.Message))
	}
	b.WriteString("\n")
}

// partWriter writes a message's parts in order; consecutive sources and
// files gather into one list each.
type partWriter struct {
	b       *bytes.Buffer
	sources []string
	parts   []checkpoint.Part
	plans   map[string]int // the plan id's last part, which wins
	seen    map[string]bool
}

func (w *partWriter) flushLists() {
	if len(w.sources) > 0 {
		w.b.WriteString("\n**Sources**\n\n")
		for _, s := range w.sources {
			w.b.WriteString("- " + s + "\n")
		}
		w.sources = nil
	}
}

func (w *partWriter) part(p *checkpoint.Part) {
	b := w.b
	if p.Type != checkpoint.PartSource {
		w.flushLists()
	}
	switch p.Type {
	case checkpoint.PartText:
		if strings.TrimSpace(p.Text) != "" {
			b.WriteString("\n" + strings.TrimRight(p.Text, "\n") + "\n")
		}
	case checkpoint.PartReasoning:
		b.WriteString("\n<details>\n<summary>Reasoning</summary>\n\n" + strings.TrimRight(p.Text, "\n") + "\n\n</details>\n")
	case checkpoint.PartToolCall:
		w.toolCall(p)
	case checkpoint.PartData:
		w.data(p)
	case checkpoint.PartSource:
		w.sources = append(w.sources, mdLink(firstOf(p.Title, p.URL), p.URL))
	case checkpoint.PartImage:
		fmt.Fprintf(b, "\n![image](%s)\n", p.Image)
	case checkpoint.PartFile:
		var url string
		_ = json.Unmarshal(p.Data, &url) // a file part's data is its URL
		fmt.Fprintf(b, "\n**File:** %s (%s)\n", mdLink(firstOf(p.Filename, url), url), p.MimeType)
	default:
		raw := wire.AppendPart(nil, p)
		fmt.Fprintf(b, "\n**Part `%s`**\n\n%s", p.Type, fenced("json", prettyJSON(raw)))
	}
}

func (w *partWriter) toolCall(p *checkpoint.Part) {
	fmt.Fprintf(w.b, "\n**Tool call `%s`** (`%s`)\n\nArguments:\n\n%s", p.ToolName, p.ToolCallID, fenced("json", prettyJSON(argsOf(p))))
	switch {
	case p.Result == nil:
		w.b.WriteString("\nNo result.\n")
	case p.IsError:
		fmt.Fprintf(w.b, "\n**Error** (the tool failed):\n\n%s", fenced("json", prettyJSON(p.Result)))
	default:
		fmt.Fprintf(w.b, "\nResult:\n\n%s", fenced("json", prettyJSON(p.Result)))
	}
}

func argsOf(p *checkpoint.Part) []byte {
	if len(p.Args) > 0 && string(p.Args) != "{}" {
		return p.Args
	}
	if p.ArgsText != "" {
		if json.Valid([]byte(p.ArgsText)) {
			return []byte(p.ArgsText)
		}
		q, _ := json.Marshal(p.ArgsText) // not JSON: shown as the text it was
		return q
	}
	return []byte(`{}`)
}

type plan struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Tasks []struct {
		Title  string `json:"title"`
		Status string `json:"status"`
	} `json:"tasks"`
}

// lastPlans maps each plan id to the position of its last plan part: each
// plan part is the whole plan, and the latest one wins.
func lastPlans(parts []checkpoint.Part) map[string]int {
	out := map[string]int{}
	for i, p := range parts {
		var pl plan
		if p.Type == checkpoint.PartData && p.Name == "plan" && json.Unmarshal(p.Data, &pl) == nil {
			out[pl.ID] = i
		}
	}
	return out
}

func (w *partWriter) data(p *checkpoint.Part) {
	b := w.b
	switch p.Name {
	case "plan":
		var pl plan
		if json.Unmarshal(p.Data, &pl) == nil {
			// A plan is shown once, where it first appears, as it last stood.
			if w.seen[pl.ID] {
				return
			}
			if w.seen == nil {
				w.seen = map[string]bool{}
			}
			w.seen[pl.ID] = true
			if last, ok := w.plans[pl.ID]; ok {
				_ = json.Unmarshal(w.parts[last].Data, &pl) // parsed once already
			}
			w.planList(&pl)
			return
		}
	case "files":
		var files []struct{ Filepath, Filename, URL string }
		if json.Unmarshal(p.Data, &files) == nil {
			b.WriteString("\n**Files**\n\n")
			for _, f := range files {
				fmt.Fprintf(b, "- %s", mdLink(firstOf(f.Filename, f.Filepath), f.URL))
				if f.Filepath != "" && f.Filepath != f.Filename {
					fmt.Fprintf(b, " `%s`", f.Filepath)
				}
				b.WriteString("\n")
			}
			return
		}
	}
	fmt.Fprintf(b, "\n**Data `%s`**\n\n%s", p.Name, fenced("json", prettyJSON(p.Data)))
}

func (w *partWriter) planList(pl *plan) {
	fmt.Fprintf(w.b, "\n**%s**\n\n", oneLine(firstOf(pl.Title, "Plan")))
	for _, t := range pl.Tasks {
		box := " "
		if t.Status == "done" {
			box = "x"
		}
		fmt.Fprintf(w.b, "- [%s] %s\n", box, oneLine(t.Title))
	}
}

// fenced returns body in a fenced code block whose fence is longer than
// any run of backquotes in it.
func fenced(lang string, body []byte) string {
	longest, run := 0, 0
	for _, c := range body {
		if c == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	f := strings.Repeat("`", max(3, longest+1))
	return f + lang + "\n" + strings.TrimRight(string(body), "\n") + "\n" + f + "\n"
}

// prettyJSON indents a JSON value by two spaces; anything else is shown
// as a JSON string of its text.
func prettyJSON(v []byte) []byte {
	var buf bytes.Buffer
	if len(v) == 0 {
		return []byte("null")
	}
	if json.Indent(&buf, v, "", "  ") != nil {
		q, _ := json.Marshal(string(v)) // a string always marshals
		return q
	}
	return buf.Bytes()
}

func quote(s string) string {
	q, _ := json.Marshal(s) // a string always marshals
	return string(q)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// mdLink is [text](url), or the text alone without a url; brackets in the
// text and parentheses in the url are escaped.
func mdLink(text, url string) string {
	text = strings.NewReplacer("[", "\\[", "]", "\\]").Replace(oneLine(firstOf(text, url, "file")))
	if url == "" {
		return text
	}
	return "[" + text + "](" + strings.NewReplacer("(", "%28", ")", "%29", " ", "%20").Replace(url) + ")"
}
