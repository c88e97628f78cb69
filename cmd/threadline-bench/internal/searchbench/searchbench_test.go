package searchbench

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/threadline/threadline/store/pgtest"
)

// TestRunSmall runs the bench on a small corpus: it builds it, measures
// every kind of query and the appends, and prints its JSON line.
func TestRunSmall(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("creates a database and a corpus")
	}
	db := pgtest.New(t) // the bench creates (and drops) its own database beside it
	var stdout, stderr bytes.Buffer
	args := []string{"--threads", "20", "--messages", "400", "--callers", "2", "--queries", "3", "--appends", "3", "--database-url", db}
	if err := Run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); err != nil {
		t.Fatalf("Run: %v\n%s", err, stderr.String())
	}
	var r Result
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("output: %v\n%s", err, stdout.String())
	}
	if r.Messages != 400 || r.Threads != 20 || len(r.Search) != 7 || r.IndexBytesPerMsg <= 0 || r.AppendWithMs.Queries != 3 || r.AppendWithoutMs.Queries != 3 {
		t.Errorf("result %+v", r)
	}
	for name, l := range r.Search {
		if l.Queries != 3 || l.P50ms <= 0 {
			t.Errorf("%s: %+v", name, l)
		}
	}
	if r.Search["common_word"].MeanHits == 0 {
		t.Errorf("common words found nothing: %+v", r.Search)
	}
	if !strings.Contains(stderr.String(), "dropped") {
		t.Errorf("the database was not dropped:\n%s", stderr.String())
	}
}

func TestFlags(t *testing.T) {
	t.Parallel()
	env := func(string) string { return "" }
	for _, args := range [][]string{{"--threads", "0"}, {"--callers", "0"}, {"--threads", "10", "--messages", "5"}, {"extra"}} {
		var out, errOut bytes.Buffer
		if _, err := parseFlags(args, env, &out, &errOut); err == nil {
			t.Errorf("parseFlags(%q): no error", args)
		}
	}
}
