package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
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
