package export

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// ChatGPT's conversations.json: an array of conversations, each a tree of
// nodes in "mapping" with "current_node" the leaf it showed.
type gptConversation struct {
	ID             *string             `json:"id"`
	ConversationID *string             `json:"conversation_id"`
	Title          *string             `json:"title"`
	CreateTime     *float64            `json:"create_time"`
	UpdateTime     *float64            `json:"update_time"`
	Mapping        map[string]*gptNode `json:"mapping"`
	CurrentNode    *string             `json:"current_node"`
}

type gptNode struct {
	ID       *string     `json:"id"`
	Message  *gptMessage `json:"message"`
	Parent   *string     `json:"parent"`
	Children []string    `json:"children"`
}

type gptMessage struct {
	ID     *string `json:"id"`
	Author struct {
		Role string  `json:"role"`
		Name *string `json:"name"`
	} `json:"author"`
	CreateTime *float64    `json:"create_time"`
	Content    *gptContent `json:"content"`
	Status     *string     `json:"status"`
	Recipient  *string     `json:"recipient"`
	Metadata   struct {
		Hidden    *bool   `json:"is_visually_hidden_from_conversation"`
		ModelSlug *string `json:"model_slug"`
	} `json:"metadata"`
}

type gptContent struct {
	ContentType string            `json:"content_type"`
	Parts       []json.RawMessage `json:"parts"`
	Text        *string           `json:"text"`
	Result      *string           `json:"result"`
	URL         *string           `json:"url"`
	Title       *string           `json:"title"`
	Thoughts    []struct {
		Summary string `json:"summary"`
		Content string `json:"content"`
	} `json:"thoughts"`
}

// fromChatGPT converts one conversation: every branch is kept, hidden,
// system and empty nodes are left out (their children go under the
// nearest kept ancestor), and current_node becomes the head. An assistant
// turn's steps (code the model ran, the tool's output, its thoughts, its
// answer) become one assistant message: each step is a checkpoint that
// continues the one before and holds the turn so far, as the service's own
// agent turns do.
func fromChatGPT(raw json.RawMessage, where string, opt Options) (*thread.ImportThread, error) {
	var c gptConversation
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, invalid(where, "%s", jsonErr(err))
	}
	key := deref(c.ConversationID)
	if key == "" {
		key = deref(c.ID)
	}
	it := &thread.ImportThread{Thread: thread.Thread{ID: threadIDFor(key)}}
	created := epoch(deref(c.CreateTime), opt.Now)
	it.Thread.CreatedAt, it.Thread.UpdatedAt = created, epoch(deref(c.UpdateTime), created)
	var err error
	if it.Thread.Title, err = title(deref(c.Title), where); err != nil {
		return nil, err
	}
	src := make(map[string]*srcNode, len(c.Mapping))
	for k, n := range c.Mapping {
		if n == nil {
			return nil, invalid(where+".mapping["+strconv.Quote(k)+"]", "must be a node object, not null")
		}
		sn := &srcNode{key: k, parent: deref(n.Parent), children: n.Children, where: where + ".mapping[" + strconv.Quote(k) + "]"}
		if n.Message != nil {
			sn.time = deref(n.Message.CreateTime)
		}
		src[k] = sn
	}
	ordered, err := order(src)
	if err != nil {
		return nil, err
	}
	conv := gptConverter{it: it, kept: make(map[string]int, len(ordered)), opt: opt, created: created}
	for _, sn := range ordered {
		if err := conv.node(sn, c.Mapping[sn.key]); err != nil {
			return nil, err
		}
	}
	numberNodes(it)
	var shown uuid.UUID
	if cur := deref(c.CurrentNode); cur != "" {
		if i, ok := conv.nearest(cur); ok {
			shown = it.Nodes[i].ID
		}
	}
	it.Head = headFor(it, shown)
	it.Thread.Metadata = importMetadata("chatgpt", key, conv.models)
	return it, nil
}

type gptConverter struct {
	it      *thread.ImportThread
	kept    map[string]int // source key -> position of its checkpoint, or of its nearest kept ancestor's (-1: none)
	opt     Options
	created time.Time
	models  []string
}

func (g *gptConverter) nearest(key string) (int, bool) {
	i, ok := g.kept[key]
	return i, ok && i >= 0
}

func (g *gptConverter) node(sn *srcNode, n *gptNode) error {
	above := -1
	if sn.parent != "" {
		above = g.kept[sn.parent]
	}
	g.kept[sn.key] = above // unless it is kept, below
	m := n.Message
	if m == nil || m.Author.Role == "system" || deref(m.Metadata.Hidden) || m.Content == nil {
		return nil
	}
	if ct := m.Content.ContentType; ct == "user_editable_context" || ct == "model_editable_context" || ct == "reasoning_recap" {
		return nil
	}
	at := epoch(deref(m.CreateTime), g.created)
	var parent *checkpoint.Node
	if above >= 0 {
		parent = &g.it.Nodes[above]
	}
	var node checkpoint.Node
	switch m.Author.Role {
	case "user":
		parts, err := gptParts(m, sn.where+".message.content")
		if err != nil {
			return err
		}
		node = checkpoint.Node{Role: checkpoint.RoleUser, Content: parts}
	case "assistant", "tool":
		var err error
		if node, err = g.step(m, sn, parent); err != nil {
			return err
		}
	default:
		return invalid(sn.where+".message.author.role", "%s is not user, assistant, tool or system", strconv.Quote(m.Author.Role))
	}
	node.ID, node.CreatedAt = idFor(g.it.Thread.ID, sn.key), at
	if parent != nil {
		node.ParentID = parent.ID
	}
	if slug := deref(m.Metadata.ModelSlug); slug != "" && !slices.Contains(g.models, slug) {
		g.models = append(g.models, slug)
	}
	g.kept[sn.key] = len(g.it.Nodes)
	g.it.Nodes = append(g.it.Nodes, node)
	return nil
}

// step converts an assistant or tool node: it continues its parent's
// turn when the parent is an assistant message.
func (g *gptConverter) step(m *gptMessage, sn *srcNode, parent *checkpoint.Node) (checkpoint.Node, error) {
	var parts []checkpoint.Part
	if parent != nil && parent.Role == checkpoint.RoleAssistant {
		parts = append(parts, parent.Content...)
		if len(parts) >= maxTurnParts {
			return checkpoint.Node{}, invalid(sn.where, "its turn has more than %d steps", maxTurnParts)
		}
	}
	text := gptText(m.Content)
	recipient := deref(m.Recipient)
	where := sn.where + ".message.content"
	switch {
	case m.Author.Role == "tool":
		parts = gptToolResult(parts, m, text, sn.key)
	case recipient != "" && recipient != "all":
		parts = append(parts, checkpoint.Part{Type: checkpoint.PartToolCall, ToolCallID: sn.key, ToolName: recipient,
			ArgsText: text, Args: checkpoint.ArgsObject(text)})
	case m.Content.ContentType == "thoughts":
		for _, t := range m.Content.Thoughts {
			parts = append(parts, checkpoint.Part{Type: checkpoint.PartReasoning, Text: strings.TrimSpace(t.Summary + "\n\n" + t.Content)})
		}
	case m.Content.ContentType == "tether_quote":
		parts = append(parts, checkpoint.Part{Type: checkpoint.PartSource, SourceType: "url", ID: sn.key, URL: deref(m.Content.URL), Title: deref(m.Content.Title)})
	default:
		own, err := gptParts(m, where)
		if err != nil {
			return checkpoint.Node{}, err
		}
		parts = append(parts, own...)
	}
	st := &checkpoint.Status{Type: "complete", Reason: "stop"}
	if s := deref(m.Status); s != "" && s != "finished_successfully" {
		st = &checkpoint.Status{Type: "incomplete", Reason: "other"}
	}
	return checkpoint.Node{Role: checkpoint.RoleAssistant, Content: parts, Status: st}, nil
}

// gptToolResult answers the turn's last unanswered call with a tool
// node's output, or adds the output as a call of its own.
func gptToolResult(parts []checkpoint.Part, m *gptMessage, text, key string) []checkpoint.Part {
	res, _ := json.Marshal(text) // a string always marshals
	isErr := m.Content.ContentType == "system_error"
	for i := len(parts) - 1; i >= 0; i-- {
		if parts[i].Type == checkpoint.PartToolCall && parts[i].Result == nil {
			parts[i].Result, parts[i].IsError = res, isErr
			return parts
		}
	}
	name := deref(m.Author.Name)
	if name == "" {
		name = "tool"
	}
	return append(parts, checkpoint.Part{Type: checkpoint.PartToolCall, ToolCallID: key, ToolName: name, Args: json.RawMessage(`{}`),
		Result: res, IsError: isErr})
}

// gptText is a content's text: its string parts, or its text or result.
func gptText(c *gptContent) string {
	var b strings.Builder
	for _, p := range c.Parts {
		var s string
		if json.Unmarshal(p, &s) == nil {
			b.WriteString(s)
		}
	}
	if b.Len() == 0 {
		b.WriteString(deref(c.Text))
		b.WriteString(deref(c.Result))
	}
	return b.String()
}

// gptParts maps content.parts: strings become text parts, an image or
// other asset a text part naming it (its bytes are not in the export).
func gptParts(m *gptMessage, where string) ([]checkpoint.Part, error) {
	c := m.Content
	var out []checkpoint.Part
	for i, p := range c.Parts {
		var s string
		if json.Unmarshal(p, &s) == nil {
			if s != "" {
				out = append(out, checkpoint.Part{Type: checkpoint.PartText, Text: s})
			}
			continue
		}
		var asset struct {
			ContentType  string `json:"content_type"`
			AssetPointer string `json:"asset_pointer"`
		}
		if err := json.Unmarshal(p, &asset); err != nil {
			return nil, invalid(where+".parts["+strconv.Itoa(i)+"]", "must be a string or an object: %s", jsonErr(err))
		}
		out = append(out, checkpoint.Part{Type: checkpoint.PartText, Text: "[" + strings.TrimSuffix(firstOf(asset.ContentType, "asset"), "_asset_pointer") + ": " + asset.AssetPointer + "]"})
	}
	if len(c.Parts) == 0 {
		if t := deref(c.Text) + deref(c.Result); t != "" {
			out = append(out, checkpoint.Part{Type: checkpoint.PartText, Text: t})
		}
	}
	return out, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
