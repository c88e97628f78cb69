package peer

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/model/builtin"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
)

// verify reads the thread back through a new Service (from Postgres) and
// compares the run's reply with what it streamed. wantParent is the user
// message the reply must answer; prompt is that message's text. For an edit,
// userParent is where the new user message must hang. head is the thread's
// stored head right after the run (later runs move it): a client reloaded
// then must have shown the new reply. It returns "" when everything
// matches, else what does not.
func (b *peerBench) verify(ctx context.Context, threadID uuid.UUID, r runResult, wantParent uuid.UUID, prompt string, userParent *uuid.UUID, head uuid.UUID) string {
	var p problems
	streamed := p.checkStream(r, wantParent, prompt)
	// Untimed, so that the store breakdown holds the runs only.
	snap, err := engine.New(b.st, stream.New[thread.Event](16), b.models, b.st, engine.Config{Logger: b.log}).Snapshot(ctx, peerCaller, threadID)
	if err != nil {
		return "read back: " + err.Error()
	}
	if snap.ActiveRun != nil {
		p.add("a run is still active after the final snapshot")
	}
	p.checkReply(snap.Tree.Get(r.run.MessageID), streamed, r, wantParent)
	if userParent != nil {
		p.checkEdit(snap.Tree.Get(wantParent), wantParent, prompt, *userParent)
	}
	p.checkHead(snap.Tree, head, r.run.MessageID, wantParent)
	return strings.Join(p, "; ")
}

// problems is what verify found that does not match, one sentence each.
type problems []string

func (p *problems) add(format string, a ...any) { *p = append(*p, fmt.Sprintf(format, a...)) }

// checkStream compares what run r streamed with the built-in model's reply
// to prompt and with its final snapshot, and returns the reply there (nil
// when there is none).
func (p *problems) checkStream(r runResult, wantParent uuid.UUID, prompt string) *checkpoint.Node {
	id := r.run.MessageID
	if r.badIDs > 0 {
		p.add("%d token events named another message than %s", r.badIDs, id)
	}
	if r.first == nil || r.first.Running == nil || r.first.Running.ID != id {
		p.add("the first snapshot does not hold the running reply %s", id)
	}
	if want := builtin.BuiltinText(prompt, r.run.TreeSeq, peerReplyTokens); r.text != want {
		p.add("streamed text (%d bytes) is not the built-in model's reply to the prompt (%d bytes)", len(r.text), len(want))
	}
	streamed := r.final.Tree.Get(id)
	if streamed == nil {
		p.add("the final snapshot has no message %s", id)
	} else if streamed.Text() != r.text || streamed.ParentID != wantParent {
		p.add("the final snapshot's message %s differs from the tokens or parent", id)
	}
	return streamed
}

// checkReply compares the persisted reply got with what run r streamed
// and with streamed, the reply in its final snapshot (nil when there was
// none).
func (p *problems) checkReply(got, streamed *checkpoint.Node, r runResult, wantParent uuid.UUID) {
	if got == nil {
		p.add("reply %s is not in the persisted tree", r.run.MessageID)
		return
	}
	if got.Text() != r.text {
		p.add("persisted reply text (%d bytes) differs from the streamed text (%d bytes)", len(got.Text()), len(r.text))
	}
	if got.ParentID != wantParent {
		p.add("persisted reply's parent is %s, want %s", got.ParentID, wantParent)
	}
	if got.Role != checkpoint.RoleAssistant || got.Status == nil || got.Status.Type != "complete" || got.RunID != r.run.ID || got.Running {
		p.add("persisted reply is not a complete assistant message of run %s", r.run.ID)
	}
	if streamed != nil && (got.Seq != streamed.Seq || !got.CreatedAt.Equal(streamed.CreatedAt)) {
		p.add("persisted reply's seq/created_at differ from the final snapshot's")
	}
}

// checkEdit checks that the persisted user message u (id) is the edit that
// was sent, prompt, under userParent.
func (p *problems) checkEdit(u *checkpoint.Node, id uuid.UUID, prompt string, userParent uuid.UUID) {
	switch {
	case u == nil:
		p.add("edited user message %s is not in the persisted tree", id)
	case u.Role != checkpoint.RoleUser || u.Text() != prompt:
		p.add("persisted user message %s is not the edit that was sent", id)
	case u.ParentID != userParent:
		p.add("persisted edit's parent is %s, want %s", u.ParentID, userParent)
	}
}

// checkHead checks that a client reloaded at the stored head would show
// the reply id, answering wantParent, at the end of its branch.
func (p *problems) checkHead(tree *checkpoint.Tree, head, id, wantParent uuid.UUID) {
	path, repo := tree.Export(head)
	if head != id || repo.HeadID == nil || *repo.HeadID != id || len(path) < 2 || path[len(path)-1].ID != id || path[len(path)-2].ID != wantParent {
		p.add("a reloaded client would not show the new reply at the head of its branch")
	}
}
