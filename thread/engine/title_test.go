package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
	twait "github.com/threadline/threadline/thread/threadtest/wait"
)

// TestCancelledFirstReplyTitles: a first reply stopped by the person still
// names its thread by the question (the title model is asked only about a
// reply that succeeded), so the thread never stays "New chat".
func TestCancelledFirstReplyTitles(t *testing.T) {
	t.Parallel()
	for _, titleModel := range []string{"", "builtin"} {
		t.Run("title model "+titleModel, func(t *testing.T) {
			t.Parallel()
			started := make(chan struct{})
			block := funcTool{"block", func(ctx context.Context, _ json.RawMessage) (thread.ToolOutput, error) {
				close(started)
				<-ctx.Done()
				return thread.ToolOutput{}, ctx.Err()
			}}
			m := &agentScript{steps: [][]thread.Delta{{call("c1", "block", `{}`)}, {text("never")}}}
			svc, st, _ := fakeSetup(t, m, engine.Config{Tools: registry(t, block), TitleModel: titleModel})
			tid := uuid.New()
			r, _, err := svc.StartRun(context.Background(), "local", tid, thread.RunRequest{Message: msg("repaint the kitchen")})
			if err != nil {
				t.Fatal(err)
			}
			evs, done := live(svc, r)
			<-started
			if err := svc.CancelRun(context.Background(), "local", tid, r.ID); err != nil {
				t.Fatal(err)
			}
			all := rest(t, evs, done)
			if got := all[len(all)-1].Snapshot.RunStatus; got != thread.RunCancelled {
				t.Fatalf("run: got %s, want cancelled", got)
			}
			th, err := st.ThreadGet(context.Background(), "local", tid)
			if err != nil {
				t.Fatal(err)
			}
			if th.Title == nil || *th.Title != "repaint the kitchen" {
				t.Fatalf("title after a cancelled first reply: got %v, want %q", th.Title, "repaint the kitchen")
			}
		})
	}
}

// TestChatAndTitleAreOneCallWithoutTools: a chat turn (no tools anywhere)
// and the thread's title are both the model's one method, Stream, called
// without tools; the turn's reply is its text deltas, the title the
// title call's.
func TestChatAndTitleAreOneCallWithoutTools(t *testing.T) {
	t.Parallel()
	m := &agentScript{steps: [][]thread.Delta{{text("Blue, "), text("mostly.")}, {text("Kitchen colours")}}}
	svc, st, _ := fakeSetup(t, m, engine.Config{TitleModel: "recorder"})
	tid := uuid.New()
	r, _, err := svc.StartRun(context.Background(), "local", tid, thread.RunRequest{Message: msg("repaint the kitchen")})
	if err != nil {
		t.Fatal(err)
	}
	evs, done := live(svc, r)
	all := rest(t, evs, done)
	if got := all[len(all)-1].Snapshot.RunStatus; got != thread.RunSucceeded {
		t.Fatalf("run: got %s, want succeeded", got)
	}
	var th *thread.Thread
	twait.Eventually(t, 10*time.Second, func() bool {
		th, err = st.ThreadGet(context.Background(), "local", tid)
		return err == nil && th.Title != nil && *th.Title == "Kitchen colours"
	}, "the title model's title")
	m.mu.Lock()
	reqs := append([]thread.ModelRequest(nil), m.reqs...)
	m.mu.Unlock()
	if len(reqs) != 2 {
		t.Fatalf("model calls: got %d, want 2 (the turn, the title)", len(reqs))
	}
	for i, req := range reqs {
		if req.Tools != nil {
			t.Errorf("call %d: got tools %+v, want none", i, req.Tools)
		}
	}
	if got, want := texts(reqs[0].Messages), "user:repaint the kitchen"; got != want {
		t.Errorf("the turn's messages: got %q, want %q", got, want)
	}
	if n := len(reqs[1].Messages); n != 2 || reqs[1].Messages[0].Role != checkpoint.RoleSystem {
		t.Errorf("the title call's messages: got %+v, want the title prompt and the exchange", reqs[1].Messages)
	}
}
