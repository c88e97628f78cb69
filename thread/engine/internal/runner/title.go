package runner

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// titlePrompt is what the title model is asked before the exchange.
const titlePrompt = "Write a title of at most six words for the conversation below. Answer with the title only, no quotes."

// autoTitle names an untitled thread after its first exchange: with the
// configured title model when there is one (reply is the assistant's first
// reply), else, or when that model fails, from the first words of the
// first user message.
func (s *Runner) autoTitle(caller string, threadID uuid.UUID, tree *checkpoint.Tree, reply string) {
	// Bounded by Shutdown's grace too (abandonCtx).
	ctx, cancel := context.WithTimeout(s.abandonCtx, 30*time.Second)
	defer cancel()
	if tree.Len() == 0 {
		return
	}
	question := tree.Nodes()[0].Text()
	title := ""
	if s.cfg.TitleModel != "" {
		t, err := s.modelTitle(ctx, question, reply)
		if err != nil {
			s.log.Warn("title model failed; titling from the first words", "thread_id", threadID, "model", s.cfg.TitleModel, "err", err)
		}
		title = t
	}
	if title == "" {
		title = thread.TitleFrom(question)
	}
	th, err := s.store.ThreadGet(ctx, caller, threadID)
	if err != nil || th.Title != nil || title == "" {
		return
	}
	if _, err := s.store.ThreadUpdate(ctx, caller, threadID, thread.ThreadUpdate{Title: &title}); err != nil {
		s.log.Warn("auto title", "thread_id", threadID, "err", err)
	}
}

// modelTitle asks the title model for a title of the first exchange.
func (s *Runner) modelTitle(ctx context.Context, question, reply string) (string, error) {
	m, _, err := s.models.Resolve(s.cfg.TitleModel)
	if err != nil {
		return "", err
	}
	text := func(t string) []thread.ModelPart { return []thread.ModelPart{{Type: thread.PartText, Text: t}} }
	const most = 2000 // bytes of each side of the exchange the model sees
	req := thread.ModelRequest{Messages: []thread.ModelMessage{
		{Role: checkpoint.RoleSystem, Parts: text(titlePrompt)},
		{Role: checkpoint.RoleUser, Parts: text("User: " + cut(question, most) + "\n\nAssistant: " + cut(reply, most))},
	}}
	var b strings.Builder
	// A chat call: no tools, so the reply is text (other deltas are not
	// the title's).
	if _, err := m.Stream(ctx, req, func(d thread.Delta) error {
		if d.Kind != thread.DeltaText {
			return nil
		}
		if b.Len() > 400 {
			return errors.New("title too long")
		}
		b.WriteString(d.Text)
		return nil
	}); err != nil {
		return "", err
	}
	return thread.TitleFrom(thread.Storable(strings.Trim(strings.TrimSpace(b.String()), `"'`))), nil
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
