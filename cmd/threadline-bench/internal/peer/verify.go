package peer

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/model"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
)

// verify reads the thread back through a new Service (from Postgres) and
// compares the run's reply with what it streamed. wantParent is the user
// message the reply must answer; prompt is that message's text. For an edit,
// userParent is where the new user message must hang. head is the thread's
// stored head right after the run (later runs move it): a client reloaded
// then must have shown the new reply. It returns "" when everything
// matches, else what does not.
func (b *peerBench) verify(ctx context.Context, threadID uuid.UUID, r runResult, wantParent uuid.UUID, prompt string, userParent *uuid.UUID, head uuid.UUID) string {
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	id := r.run.MessageID
	if r.badIDs > 0 {
		bad("%d token events named another message than %s", r.badIDs, id)
	}
	if r.first == nil || r.first.Running == nil || r.first.Running.ID != id {
		bad("the first snapshot does not hold the running reply %s", id)
	}
	if want := model.BuiltinText(prompt, r.run.TreeSeq, peerReplyTokens); r.text != want {
		bad("streamed text (%d bytes) is not the built-in model's reply to the prompt (%d bytes)", len(r.text), len(want))
	}
	streamed := r.final.Tree.Get(id)
	if streamed == nil {
		bad("the final snapshot has no message %s", id)
	} else if streamed.Text() != r.text || streamed.ParentID != wantParent {
		bad("the final snapshot's message %s differs from the tokens or parent", id)
	}
	// Untimed, so that the store breakdown holds the runs only.
	snap, err := thread.New(b.st, stream.New[thread.Event](16), b.models, b.st, thread.Config{Logger: b.log}).Snapshot(ctx, peerCaller, threadID)
	if err != nil {
		return "read back: " + err.Error()
	}
	if snap.ActiveRun != nil {
		bad("a run is still active after the final snapshot")
	}
	got := snap.Tree.Get(id)
	switch {
	case got == nil:
		bad("reply %s is not in the persisted tree", id)
	default:
		if got.Text() != r.text {
			bad("persisted reply text (%d bytes) differs from the streamed text (%d bytes)", len(got.Text()), len(r.text))
		}
		if got.ParentID != wantParent {
			bad("persisted reply's parent is %s, want %s", got.ParentID, wantParent)
		}
		if got.Role != checkpoint.RoleAssistant || got.Status == nil || got.Status.Type != "complete" || got.RunID != r.run.ID || got.Running {
			bad("persisted reply is not a complete assistant message of run %s", r.run.ID)
		}
		if streamed != nil && (got.Seq != streamed.Seq || !got.CreatedAt.Equal(streamed.CreatedAt)) {
			bad("persisted reply's seq/created_at differ from the final snapshot's")
		}
	}
	if userParent != nil {
		u := snap.Tree.Get(wantParent)
		switch {
		case u == nil:
			bad("edited user message %s is not in the persisted tree", wantParent)
		case u.Role != checkpoint.RoleUser || u.Text() != prompt:
			bad("persisted user message %s is not the edit that was sent", wantParent)
		case u.ParentID != *userParent:
			bad("persisted edit's parent is %s, want %s", u.ParentID, *userParent)
		}
	}
	path, repo := snap.Tree.Export(head)
	if head != id || repo.HeadID == nil || *repo.HeadID != id || len(path) < 2 || path[len(path)-1].ID != id || path[len(path)-2].ID != wantParent {
		bad("a reloaded client would not show the new reply at the head of its branch")
	}
	return strings.Join(problems, "; ")
}
