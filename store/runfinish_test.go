package store_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/threadline/threadline/thread"
)

// TestRunFinishWrites checks what threadline_run_finish (0023) writes in
// its two updates: the run's end, and the thread's end, head and title,
// which a finish gives only to a thread that has none.
func TestRunFinishWrites(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	tests := []struct {
		name, before, finish, want string
	}{
		{"untitled takes the run's title", "", "from the run", "from the run"},
		{"a title stays", "kept", "from the run", "kept"},
		{"no title given", "", "", ""},
	}
	for _, tt := range tests {
		th := newThread(t, s, "alice")
		if tt.before != "" {
			if _, err := s.ThreadUpdate(ctx, "alice", th.ID, thread.ThreadUpdate{Title: &tt.before}); err != nil {
				t.Fatal(err)
			}
		}
		in, fin := benchTurn(th, uuid.Nil)
		fin.Title = tt.finish
		fin.Usage = &thread.Usage{PromptTokens: 3, CompletionTokens: 200}
		if _, err := s.RunCreate(ctx, in, fin.Records[0]); err != nil {
			t.Fatalf("%s: RunCreate: %v", tt.name, err)
		}
		if err := s.RunFinish(ctx, fin); err != nil {
			t.Fatalf("%s: RunFinish: %v", tt.name, err)
		}
		r, err := s.RunGet(ctx, th.ID, in.Run.ID)
		if err != nil || r.Status != thread.RunSucceeded || r.Owner != "" || r.FinishedAt == nil || r.Usage == nil || r.Usage.CompletionTokens != 200 {
			t.Fatalf("%s: run after the finish: got %+v (%v), want succeeded, no owner, finished, its usage", tt.name, r, err)
		}
		got, err := s.ThreadGet(ctx, "alice", th.ID)
		if err != nil {
			t.Fatal(err)
		}
		title := ""
		if got.Title != nil {
			title = *got.Title
		}
		if title != tt.want || got.LastSeq != fin.Assistant.Seq || got.HeadID != fin.Assistant.ID {
			t.Errorf("%s: thread: got title %q, last %d, head %s; want %q, %d, %s",
				tt.name, title, got.LastSeq, got.HeadID, tt.want, fin.Assistant.Seq, fin.Assistant.ID)
		}
	}
}
