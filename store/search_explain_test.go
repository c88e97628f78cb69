package store

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/threadline/threadline/thread"
)

// TestSearchExplain prints plans on the bench's kept database (temporary).
func TestSearchExplain(t *testing.T) {
	url := os.Getenv("EXPLAIN_DB")
	if url == "" {
		t.Skip()
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{os.Getenv("EXPLAIN_Q")} {
		sql, args, _ := searchSQL(os.Getenv("EXPLAIN_CALLER"), thread.SearchQuery{Text: q, Limit: 21})
		rows, err := conn.Query(context.Background(), "EXPLAIN (ANALYZE, BUFFERS) "+sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var l string
			_ = rows.Scan(&l)
			fmt.Println(l)
		}
	}
}
