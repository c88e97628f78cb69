package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/thread"
)

// searchModes are MessageSearch's two plans: every match ranked (what a
// small database always gets), and every query taken as common, so only
// the first matches found from the newest thread back are ranked (50:
// more than the fixtures hold).
var searchModes = []struct {
	name string
	set  func(*store.Store)
}{
	{"all ranked", func(*store.Store) {}},
	{"common", func(s *store.Store) { s.SetSearchTuning(50, 1e-9, -1) }},
}

// TestMessageSearchCommonWindow: a common query ranks only the first
// matches found going back from the caller's most recently active thread,
// each thread's newest message first; pages walk that set; other callers'
// threads are never read, however recent.
func TestMessageSearchCommonWindow(t *testing.T) {
	t.Parallel()
	f := searchSetup(t)
	old := f.thread(t, "old", "alice", "old")
	f.add(t, f.th["old"], "o1", "", checkpoint.RoleUser, t0, checkpoint.Part{Type: "text", Text: "otter otter otter, the otter"})
	f.add(t, old, "o2", "o1", checkpoint.RoleAssistant, t0.Add(time.Second), checkpoint.Part{Type: "text", Text: "an otter"})
	recent := f.thread(t, "new", "alice", "new")
	f.add(t, recent, "n1", "", checkpoint.RoleUser, t0.Add(time.Hour), checkpoint.Part{Type: "text", Text: "otter one, and many other words besides"})
	f.add(t, recent, "n2", "n1", checkpoint.RoleAssistant, t0.Add(time.Hour+time.Second), checkpoint.Part{Type: "text", Text: "no such animal here"})
	f.add(t, recent, "n3", "n2", checkpoint.RoleUser, t0.Add(time.Hour+2*time.Second), checkpoint.Part{Type: "text", Text: "otter two"})
	f.add(t, recent, "n4", "n3", checkpoint.RoleAssistant, t0.Add(time.Hour+3*time.Second), checkpoint.Part{Type: "text", Text: "otter three"})
	bob := f.thread(t, "bob", "bob", "bob's")
	f.add(t, bob, "b1", "", checkpoint.RoleUser, t0.Add(2*time.Hour), checkpoint.Part{Type: "text", Text: "otter otter otter otter"})

	sorted := func(hits []thread.SearchHit) []string {
		got := f.names(hits)
		slices.Sort(got)
		return got
	}
	if got, want := sorted(f.search(t, "alice", thread.SearchQuery{Text: "otter"})), []string{"n1", "n3", "n4", "o1", "o2"}; !slices.Equal(got, want) {
		t.Errorf("all ranked: got %v, want %v", got, want)
	}
	f.s.SetSearchTuning(3, 1e-9, -1)
	all := f.search(t, "alice", thread.SearchQuery{Text: "otter"})
	if got, want := sorted(all), []string{"n1", "n3", "n4"}; !slices.Equal(got, want) {
		t.Errorf("common, 3 ranked: got %v, want %v", got, want)
	}
	if got, want := sorted(f.search(t, "alice", thread.SearchQuery{Text: "otter", Role: "assistant"})), []string{"n4", "o2"}; !slices.Equal(got, want) {
		t.Errorf("common, assistant: got %v, want %v (the filter comes before the window)", got, want)
	}
	var walked []string
	var after *thread.SearchCursor
	for range 5 {
		page := f.search(t, "alice", thread.SearchQuery{Text: "otter", Limit: 2, After: after})
		walked = append(walked, f.names(page)...)
		if len(page) < 2 {
			break
		}
		last := page[len(page)-1]
		after = &thread.SearchCursor{Score: last.Score, CreatedAt: last.CreatedAt, MessageID: last.MessageID}
	}
	if want := f.names(all); !slices.Equal(walked, want) {
		t.Errorf("pages: walked %v, want %v", walked, want)
	}
	if got, want := sorted(f.search(t, "bob", thread.SearchQuery{Text: "otter"})), []string{"b1"}; !slices.Equal(got, want) {
		t.Errorf("bob: got %v, want %v", got, want)
	}
}
