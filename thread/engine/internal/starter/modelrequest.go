package starter

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// modelRequest builds what the model sees: the system message, then the path
// from the root to the message being answered, trimmed from the oldest end
// to the model's context budget. It has no tools; the run adds them.
func (s *Starter) modelRequest(ctx context.Context, caller string, tree *checkpoint.Tree, r *thread.Run, cfg thread.RunConfig) (thread.ModelRequest, error) {
	// A continued turn is its newest checkpoint; the turn a continuation
	// runs is not history but the run's own (see seeded).
	path := checkpoint.CollapseTurns(tree.PathRefs(r.ParentID))
	if n := len(path); n > 0 && path[n-1].Role == checkpoint.RoleAssistant {
		path = path[:n-1]
	}
	if budget := s.models.ContextBudget(r.Model); budget > 0 {
		size := len(cfg.System)
		keep := len(path)
		for keep > 0 {
			size += messageSize(path[keep-1].Content)
			if size > budget && keep < len(path) {
				break
			}
			keep--
		}
		// Trimmed conversations start with a user message: providers such
		// as Anthropic refuse one that starts with the assistant.
		for keep < len(path)-1 && keep > 0 && path[keep].Role != checkpoint.RoleUser {
			keep++
		}
		path = path[keep:]
	}
	msgs := make([]thread.ModelMessage, 0, len(path)+1)
	if cfg.System != "" {
		msgs = append(msgs, thread.ModelMessage{Role: checkpoint.RoleSystem, Parts: []thread.ModelPart{{Type: thread.PartText, Text: cfg.System}}})
	}
	for _, n := range path {
		msgs = append(msgs, thread.ModelMessage{Role: n.Role, Parts: thread.ModelParts(n.Content), Attachments: n.Attachments})
	}
	if s.atts != nil {
		// Newest first: if the budget runs out, older files go unread.
		var budget *int64
		if left := s.cfg.Limits.InlineBytes; left >= 0 {
			budget = &left
		}
		for i := len(msgs) - 1; i >= 0; i-- {
			if err := s.inlineAttachments(ctx, caller, &msgs[i], budget); err != nil {
				return thread.ModelRequest{}, err
			}
		}
	}
	return thread.ModelRequest{Messages: msgs, Temperature: cfg.Temperature, Call: r.TreeSeq}, nil
}

func messageSize(parts []checkpoint.Part) int {
	n := 16
	for _, p := range parts {
		n += len(p.Text) + len(p.Image) + len(p.ToolName) + len(p.ArgsText) + len(p.Result)
	}
	return n
}

// inlineAttachments turns attachment references into what the model reads:
// images as data: URL image parts, text files as text parts.
// At most *budget bytes are inlined (nil: no limit); a file over what is
// left is named instead, and the budget is spent as files are inlined.
func (s *Starter) inlineAttachments(ctx context.Context, caller string, m *thread.ModelMessage, budget *int64) error {
	if len(m.Attachments) == 0 {
		return nil
	}
	parts := append([]thread.ModelPart(nil), m.Parts...)
	for _, a := range m.Attachments {
		id, err := uuid.Parse(a.ID)
		if err != nil {
			continue
		}
		if budget != nil && a.Size > *budget {
			parts = append(parts, overInline(a, s.cfg.Limits.InlineBytes))
			continue
		}
		meta, data, err := s.atts.AttachmentData(ctx, caller, id)
		if err != nil {
			return fmt.Errorf("attachment %s: %w", a.ID, err)
		}
		if budget != nil {
			if int64(len(data)) > *budget {
				parts = append(parts, overInline(*meta, s.cfg.Limits.InlineBytes))
				continue
			}
			*budget -= int64(len(data))
		}
		switch ct := meta.ContentType; {
		case strings.HasPrefix(ct, "image/"):
			parts = append(parts, thread.ModelPart{Type: thread.PartImage, Image: dataURL(ct, data)})
		case strings.HasPrefix(ct, "text/") || ct == "application/json":
			parts = append(parts, thread.ModelPart{Type: thread.PartText, Text: fmt.Sprintf("[%s]\n%s", meta.Name, data)})
		default:
			// Binary files (PDF, …) are named, not pasted as text.
			parts = append(parts, thread.ModelPart{Type: thread.PartText, Text: fmt.Sprintf("[attached file %s (%s, %d bytes); its content is not shown to the model]", meta.Name, ct, len(data))})
		}
	}
	m.Parts = parts
	m.Attachments = nil // inlined above
	return nil
}

func dataURL(contentType string, data []byte) string {
	return "data:" + contentType + ";base64," + base64.StdEncoding.EncodeToString(data)
}
