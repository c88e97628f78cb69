package export

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// Open WebUI's chat export: an array of {id, title, chat: {history:
// {messages: {id: message}, currentId}}}, or one chat.
type owuiChat struct {
	ID        *string   `json:"id"`
	Title     *string   `json:"title"`
	CreatedAt *float64  `json:"created_at"`
	UpdatedAt *float64  `json:"updated_at"`
	Chat      *owuiBody `json:"chat"`
	History   *owuiHist `json:"history"` // a chat object given alone
}

type owuiBody struct {
	ID        *string   `json:"id"`
	Title     *string   `json:"title"`
	Timestamp *float64  `json:"timestamp"`
	History   *owuiHist `json:"history"`
}

type owuiHist struct {
	Messages  map[string]*owuiMessage `json:"messages"`
	CurrentID *string                 `json:"currentId"`
}

type owuiMessage struct {
	ID          *string         `json:"id"`
	ParentID    *string         `json:"parentId"`
	ChildrenIDs []string        `json:"childrenIds"`
	Role        string          `json:"role"`
	Content     *string         `json:"content"`
	Timestamp   *float64        `json:"timestamp"`
	Model       *string         `json:"model"`
	Done        *bool           `json:"done"`
	Output      json.RawMessage `json:"output"`
}

// owuiOutputPart names the data part that keeps an assistant message's
// output[] records (its tool calls and reasoning, as Open WebUI recorded
// them) as they were: imported messages have no run to hold raw records.
const owuiOutputPart = "openwebui.output"

// fromOpenWebUI converts one chat: every branch kept, currentId the head,
// an assistant message's output[] kept whole as a data part.
func fromOpenWebUI(raw json.RawMessage, where string, opt Options) (*thread.ImportThread, error) {
	var c owuiChat
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, invalid(where, "%s", jsonErr(err))
	}
	hist, key, name := c.History, deref(c.ID), deref(c.Title)
	created := epoch(deref(c.CreatedAt), opt.Now)
	if c.Chat != nil {
		hist = c.Chat.History
		key, name = firstOf(key, deref(c.Chat.ID)), firstOf(name, deref(c.Chat.Title))
		if c.CreatedAt == nil {
			created = epoch(deref(c.Chat.Timestamp), opt.Now)
		}
	}
	if hist == nil {
		return nil, invalid(where, "chat.history is missing")
	}
	it := &thread.ImportThread{Thread: thread.Thread{ID: threadIDFor(key), CreatedAt: created, UpdatedAt: epoch(deref(c.UpdatedAt), created)}}
	var err error
	if it.Thread.Title, err = title(name, where); err != nil {
		return nil, err
	}
	mw := where + ".chat.history.messages"
	src := make(map[string]*srcNode, len(hist.Messages))
	for k, m := range hist.Messages {
		if m == nil {
			return nil, invalid(mw+"["+strconv.Quote(k)+"]", "must be a message object, not null")
		}
		src[k] = &srcNode{key: k, parent: deref(m.ParentID), children: m.ChildrenIDs, time: deref(m.Timestamp), where: mw + "[" + strconv.Quote(k) + "]"}
	}
	ordered, err := order(src)
	if err != nil {
		return nil, err
	}
	pos := make(map[string]int, len(ordered))
	var models []string
	for _, sn := range ordered {
		m := hist.Messages[sn.key]
		n, err := owuiNode(m, sn, it.Thread.ID, created)
		if err != nil {
			return nil, err
		}
		if sn.parent != "" {
			n.ParentID = it.Nodes[pos[sn.parent]].ID
		}
		if md := deref(m.Model); md != "" && !slices.Contains(models, md) {
			models = append(models, md)
		}
		pos[sn.key] = len(it.Nodes)
		it.Nodes = append(it.Nodes, n)
	}
	numberNodes(it)
	var shown uuid.UUID
	if i, ok := pos[deref(hist.CurrentID)]; ok {
		shown = it.Nodes[i].ID
	}
	it.Head = headFor(it, shown)
	it.Thread.Metadata = importMetadata("openwebui", key, models)
	return it, nil
}

func owuiNode(m *owuiMessage, sn *srcNode, threadID uuid.UUID, created time.Time) (checkpoint.Node, error) {
	n := checkpoint.Node{ID: idFor(threadID, sn.key), CreatedAt: epoch(deref(m.Timestamp), created)}
	switch m.Role {
	case "user":
		n.Role = checkpoint.RoleUser
	case "assistant":
		n.Role = checkpoint.RoleAssistant
		n.Status = &checkpoint.Status{Type: "complete", Reason: "stop"}
		if m.Done != nil && !*m.Done {
			n.Status = &checkpoint.Status{Type: "incomplete", Reason: "other"}
		}
	case "system":
		n.Role = checkpoint.RoleSystem
	default:
		return n, invalid(sn.where+".role", "%s is not user, assistant or system", strconv.Quote(m.Role))
	}
	n.Content = []checkpoint.Part{}
	if t := deref(m.Content); t != "" {
		n.Content = append(n.Content, checkpoint.Part{Type: checkpoint.PartText, Text: t})
	}
	if len(m.Output) > 0 && string(m.Output) != "null" {
		if !json.Valid(m.Output) || m.Output[0] != '[' {
			return n, invalid(sn.where+".output", "must be an array")
		}
		n.Content = append(n.Content, checkpoint.Part{Type: checkpoint.PartData, Name: owuiOutputPart, Data: compactJSON(m.Output)})
	}
	return n, nil
}
