package store_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/thread"
)

// searchFixture is a store with threads of two callers.
type searchFixture struct {
	s   *store.Store
	ids map[string]uuid.UUID // message ids by name
	th  map[string]uuid.UUID // thread ids by name
}

func searchSetup(t *testing.T) *searchFixture {
	t.Helper()
	s, _ := setup(t)
	return &searchFixture{s: s, ids: map[string]uuid.UUID{}, th: map[string]uuid.UUID{}}
}

// thread makes a titled thread of caller.
func (f *searchFixture) thread(t *testing.T, name, caller, title string) uuid.UUID {
	t.Helper()
	th := newThread(t, f.s, caller)
	if _, err := f.s.ThreadUpdate(context.Background(), caller, th.ID, thread.ThreadUpdate{Title: &title}); err != nil {
		t.Fatal(err)
	}
	f.th[name] = th.ID
	return th.ID
}

// add appends a message named name under parent (by name, "" for a root).
func (f *searchFixture) add(t *testing.T, th uuid.UUID, name, parent string, role checkpoint.Role, at time.Time, parts ...checkpoint.Part) {
	t.Helper()
	n := &checkpoint.Node{ID: uuid.New(), ParentID: f.ids[parent], Role: role, Content: parts, CreatedAt: at}
	if role == checkpoint.RoleAssistant {
		n.Status = &checkpoint.Status{Type: "complete", Reason: "stop"}
	}
	if err := f.s.CheckpointAppend(context.Background(), th, n); err != nil {
		t.Fatalf("append %s: %v", name, err)
	}
	f.ids[name] = n.ID
}

func (f *searchFixture) search(t *testing.T, caller string, q thread.SearchQuery) []thread.SearchHit {
	t.Helper()
	if q.Limit == 0 {
		q.Limit = 50
	}
	// Everything appended so far is indexed first: search is eventually
	// consistent (see TestSearchIndexer for the indexer itself).
	if _, err := f.s.SearchIndexPending(context.Background()); err != nil {
		t.Fatal(err)
	}
	hits, err := f.s.MessageSearch(context.Background(), caller, q)
	if err != nil {
		t.Fatalf("search %q: %v", q.Text, err)
	}
	return hits
}

// names maps hits back to message names, in order.
func (f *searchFixture) names(hits []thread.SearchHit) []string {
	var out []string
	for _, h := range hits {
		for n, id := range f.ids {
			if id == h.MessageID {
				out = append(out, n)
			}
		}
	}
	return out
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// corpus is a small set of threads for alice and one for bob.
func corpus(t *testing.T) *searchFixture {
	f := searchSetup(t)
	a := f.thread(t, "a", "alice", "Deploy notes")
	f.add(t, a, "q1", "", checkpoint.RoleUser, t0, checkpoint.Part{Type: "text", Text: "How do I parse the config file in Go?"})
	f.add(t, a, "r1", "q1", checkpoint.RoleAssistant, t0.Add(time.Minute),
		checkpoint.Part{Type: "reasoning", Text: "The user wants a loader; think about yaml versus toml"},
		checkpoint.Part{Type: "text", Text: "Write a function parseConfigFile(path string) that reads it."},
		checkpoint.Part{Type: "tool-call", ToolCallID: "c1", ToolName: "read_file", Args: json.RawMessage(`{"path":"/etc/threadline.conf"}`),
			ArgsText: `{"path":"/etc/threadline.conf"}`, Result: json.RawMessage(`{"bytes":1234,"first_line":"listen = zanzibar:8080"}`)})
	// A regenerated sibling of r1: another branch.
	f.add(t, a, "r1b", "q1", checkpoint.RoleAssistant, t0.Add(2*time.Minute),
		checkpoint.Part{Type: "text", Text: "Use the encoding/json package and a quokka struct."})
	b := f.thread(t, "b", "alice", "Fox facts")
	f.add(t, b, "p1", "", checkpoint.RoleUser, t0.Add(time.Hour), checkpoint.Part{Type: "text", Text: "The quick brown fox jumps over the lazy dog"})
	f.add(t, b, "p2", "p1", checkpoint.RoleAssistant, t0.Add(time.Hour+time.Minute), checkpoint.Part{Type: "text", Text: "A brown quick fox is still a fox; foxes are running everywhere."})
	f.add(t, b, "p3", "p2", checkpoint.RoleUser, t0.Add(2*time.Hour), checkpoint.Part{Type: "text", Text: "What configuration does the den need?"},
		checkpoint.Part{Type: "source", SourceType: "url", ID: "s1", URL: "https://example.com/den", Title: "Marmalade den guide"})
	c := f.thread(t, "c", "bob", "Bob's secrets")
	f.add(t, c, "x1", "", checkpoint.RoleUser, t0, checkpoint.Part{Type: "text", Text: "quokka fox parseConfigFile zanzibar"})
	return f
}

// TestMessageSearchMatches: words (stemmed), phrases, prefixes, parts of
// identifiers, and the text of reasoning, tool calls, tool results and
// sources are found, on every branch, and only in the caller's threads.
func TestMessageSearchMatches(t *testing.T) {
	t.Parallel()
	cases := []struct {
		q    string
		want []string // in any order
	}{
		{"fox", []string{"p1", "p2"}},
		{"run", []string{"p2"}},                     // stemmed: running
		{`"quick brown fox"`, []string{"p1"}},       // phrase, in order
		{`"brown quick"`, []string{"p2"}},           //
		{"configur*", []string{"p3"}},               // prefix of configuration
		{"loa*", []string{"r1"}},                    // prefix: loader, in reasoning
		{"threadline.conf", []string{"r1"}},         // a file name in a tool call's args
		{"ConfigFile", []string{"r1"}},              // part of an identifier
		{"parseConf", []string{"r1"}},               // a partial identifier
		{"parseconfigfile", []string{"r1"}},         // any case
		{"read_file", []string{"r1"}},               // tool name
		{"zanzibar", []string{"r1"}},                // tool result
		{"toml", []string{"r1"}},                    // reasoning
		{"marmalade", []string{"p3"}},               // source title
		{"quokka", []string{"r1b"}},                 // the other branch
		{"fox -lazy", []string{"p2"}},               // exclusion
		{"yaml or marmalade", []string{"r1", "p3"}}, // or
		{"nothingmatcheshere", nil},                 //
		{"secrets", nil},                            // bob's title, not a message
	}
	for _, m := range searchModes {
		f := corpus(t)
		m.set(f.s)
		for _, tc := range cases {
			got := f.names(f.search(t, "alice", thread.SearchQuery{Text: tc.q}))
			slices.Sort(got)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s: search %q: got %v, want %v", m.name, tc.q, got, want)
			}
		}
	}
}

// TestMessageSearchCallersApart: bob's message holds every word alice
// searches for, and is never found by her; nor hers by him.
func TestMessageSearchCallersApart(t *testing.T) {
	t.Parallel()
	f := corpus(t)
	for _, q := range []string{"quokka", "fox", "parseConfigFile", "zanzibar", "ConfigFile"} {
		for _, h := range f.search(t, "alice", thread.SearchQuery{Text: q}) {
			if h.ThreadID == f.th["c"] {
				t.Errorf("alice's search %q found bob's thread", q)
			}
		}
		got := f.names(f.search(t, "bob", thread.SearchQuery{Text: q}))
		if !slices.Equal(got, []string{"x1"}) {
			t.Errorf("bob's search %q: got %v, want [x1]", q, got)
		}
	}
	if got := f.search(t, "", thread.SearchQuery{Text: "fox"}); len(got) != 0 {
		t.Errorf("caller \"\" found %d hits of others", len(got))
	}
}

// TestMessageSearchHit: a hit names its thread, title, message, role and
// time, and its snippet marks what matched.
func TestMessageSearchHit(t *testing.T) {
	t.Parallel()
	f := corpus(t)
	hits := f.search(t, "alice", thread.SearchQuery{Text: "marmalade"})
	if len(hits) != 1 {
		t.Fatalf("got %d hits, want 1", len(hits))
	}
	h := hits[0]
	if h.ThreadID != f.th["b"] || h.MessageID != f.ids["p3"] || h.Role != "user" || !h.CreatedAt.Equal(t0.Add(2*time.Hour)) ||
		h.ThreadTitle == nil || *h.ThreadTitle != "Fox facts" || h.Score <= 0 {
		t.Errorf("hit = %+v", h)
	}
	if got := marked(h); !slices.Equal(got, []string{"Marmalade"}) {
		t.Errorf("marked %v in %q, want [Marmalade]", got, h.Snippet)
	}
	// A part of an identifier is marked where it is.
	hits = f.search(t, "alice", thread.SearchQuery{Text: "configFile"})
	if len(hits) != 1 || !slices.Equal(marked(hits[0]), []string{"ConfigFile"}) {
		t.Fatalf("configFile: %+v", hits)
	}
	// A phrase marks its words.
	hits = f.search(t, "alice", thread.SearchQuery{Text: `"quick brown fox"`})
	if len(hits) != 1 || !slices.Equal(marked(hits[0]), []string{"quick brown fox"}) && !slices.Equal(marked(hits[0]), []string{"quick", "brown", "fox"}) {
		t.Errorf("phrase: marked %v in %q", marked(hits[0]), hits[0].Snippet)
	}
}

// marked is the text of each highlight.
func marked(h thread.SearchHit) []string {
	r := []rune(h.Snippet)
	var out []string
	for _, hl := range h.Highlights {
		out = append(out, string(r[hl[0]:hl[1]]))
	}
	return out
}

// TestMessageSearchRanking: a message about the words ranks above one
// that mentions them once in passing.
func TestMessageSearchRanking(t *testing.T) {
	t.Parallel()
	f := searchSetup(t)
	th := f.thread(t, "t", "alice", "ranking")
	long := "This is a long message about many unrelated things like weather and gardens and trains and the sea, " +
		"and somewhere in the middle it says lighthouse once, then goes on about bread, cheese, rivers and mountains for a while longer."
	f.add(t, th, "passing", "", checkpoint.RoleUser, t0, checkpoint.Part{Type: "text", Text: long})
	f.add(t, th, "about", "passing", checkpoint.RoleAssistant, t0, checkpoint.Part{Type: "text", Text: "Lighthouse keepers keep the lighthouse lit."})
	got := f.names(f.search(t, "alice", thread.SearchQuery{Text: "lighthouse"}))
	if want := []string{"about", "passing"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

// TestMessageSearchFilters: title, role and dates narrow the hits.
func TestMessageSearchFilters(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		q    thread.SearchQuery
		want []string
	}{
		{"title", thread.SearchQuery{Text: "fox or parse", Title: "fox FACTS"}, []string{"p1", "p2"}},
		{"title elsewhere", thread.SearchQuery{Text: "fox", Title: "deploy"}, nil},
		{"title wildcard is literal", thread.SearchQuery{Text: "fox", Title: "%"}, nil},
		{"role user", thread.SearchQuery{Text: "fox", Role: "user"}, []string{"p1"}},
		{"role assistant", thread.SearchQuery{Text: "fox", Role: "assistant"}, []string{"p2"}},
		{"from", thread.SearchQuery{Text: "fox or parse or toml", From: t0.Add(time.Hour + time.Second)}, []string{"p2"}},
		{"to", thread.SearchQuery{Text: "fox or parse or toml", To: t0.Add(time.Hour + time.Minute)}, []string{"q1", "r1", "p1"}},
		{"from and to", thread.SearchQuery{Text: "fox or parse or toml", From: t0.Add(time.Minute), To: t0.Add(time.Hour + time.Minute)}, []string{"r1", "p1"}},
	}
	for _, m := range searchModes {
		f := corpus(t)
		m.set(f.s)
		for _, tc := range cases {
			got := f.names(f.search(t, "alice", tc.q))
			slices.Sort(got)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s: %s: got %v, want %v", m.name, tc.name, got, want)
			}
		}
	}
}

// TestMessageSearchPaging: walking the pages by cursor returns every hit
// once, in score order, over ties of score and time.
func TestMessageSearchPaging(t *testing.T) {
	t.Parallel()
	f := searchSetup(t)
	th := f.thread(t, "t", "alice", "pages")
	parent := ""
	for i := range 23 {
		name := string(rune('a'+i%26)) + string(rune('a'+i/26))
		text := "otter"
		if i%3 == 0 {
			text = "otter otter otter, said the otter"
		}
		// Pairs share a time, so ties are broken by id.
		f.add(t, th, name, parent, checkpoint.RoleUser, t0.Add(time.Duration(i/2)*time.Second), checkpoint.Part{Type: "text", Text: text})
		parent = name
	}
	all := f.search(t, "alice", thread.SearchQuery{Text: "otter", Limit: 100})
	if len(all) != 23 {
		t.Fatalf("got %d hits, want 23", len(all))
	}
	var walked []thread.SearchHit
	var after *thread.SearchCursor
	for range 10 {
		page := f.search(t, "alice", thread.SearchQuery{Text: "otter", Limit: 5, After: after})
		walked = append(walked, page...)
		if len(page) < 5 {
			break
		}
		last := page[len(page)-1]
		after = &thread.SearchCursor{Score: last.Score, CreatedAt: last.CreatedAt, MessageID: last.MessageID}
	}
	if len(walked) != len(all) {
		t.Fatalf("walked %d hits, want %d", len(walked), len(all))
	}
	for i := range all {
		if walked[i].MessageID != all[i].MessageID {
			t.Fatalf("hit %d: walked %s, want %s", i, walked[i].MessageID, all[i].MessageID)
		}
		if i > 0 && all[i].Score > all[i-1].Score {
			t.Errorf("hit %d scores %v after %v", i, all[i].Score, all[i-1].Score)
		}
	}
}

// TestMessageSearchRefusesNothing: a query of no words is invalid_request.
func TestMessageSearchRefusesNothing(t *testing.T) {
	t.Parallel()
	f := searchSetup(t)
	for _, q := range []string{"", "   ", "*", `""`} {
		_, err := f.s.MessageSearch(context.Background(), "alice", thread.SearchQuery{Text: q, Limit: 10})
		if errcode.Of(err) != errcode.Invalid {
			t.Errorf("search %q: err %v, want invalid_request", q, err)
		}
	}
}

// TestMessageSearchHugeMessage: a message whose words pass what a
// tsvector holds is still appended, and found by its first words.
func TestMessageSearchHugeMessage(t *testing.T) {
	t.Parallel()
	f := searchSetup(t)
	th := f.thread(t, "t", "alice", "huge")
	var b []byte
	b = append(b, "needle "...)
	for i := 0; len(b) < 1_500_000; i++ {
		b = append(b, []byte(uuid.NewString()+"x ")...)
	}
	f.add(t, th, "huge", "", checkpoint.RoleUser, t0, checkpoint.Part{Type: "tool-call", ToolCallID: "c", ToolName: "dump", Args: json.RawMessage(`{}`), Result: mustJSON(t, string(b))})
	if got := f.names(f.search(t, "alice", thread.SearchQuery{Text: "needle"})); !slices.Equal(got, []string{"huge"}) {
		t.Errorf("got %v, want [huge]", got)
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
