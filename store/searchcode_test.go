package store_test

import (
	"context"
	"strings"
	"testing"
)

// sqlOldCodeText is search_code_text as migration 0017 defined it.
const sqlOldCodeText = `SELECT nullif(btrim(regexp_replace($1::text,
	'(^|[[:space:]])[[:alpha:]][[:lower:]]*[,.;:!?)"'']*(?=[[:space:]]|$)', ' ', 'g')), '')`

// TestSearchCodeTextFastPath: search_code_text (migration 0021) answers
// what 0017's did, but NULL where that one left only whitespace (every
// word plain), which no substring search can match.
func TestSearchCodeTextFastPath(t *testing.T) {
	t.Parallel()
	_, pool := setup(t)
	ctx := context.Background()
	docs := []string{
		"", " ", "\n", "a", "A", "ab ", " ab", "a.", ".", "a b c", "Ab Cd", "aB",
		"the okapi grazes.", "Hello, world!", "said: (yes) ok?)", "it's", "don't panic",
		"call fooBar now", "x_1 and x_2", "v1.2 is out", "see /usr/bin", "#42", "\"quoted\"",
		"line one\r\nline two\tand\fmore\vtext", "Élan über ÉLAN", "the quick brown fox jumps over the lazy dog",
		strings.Repeat("plain words only here ", 200), strings.Repeat("plain words ", 100) + "getUser " + strings.Repeat("more ", 50),
	}
	var crlf *string
	if err := pool.QueryRow(ctx, `SELECT search_code_text($1)`, "line one\r\nline two").Scan(&crlf); err != nil {
		t.Fatal(err)
	}
	if crlf != nil {
		t.Errorf("search_code_text of plain words with CRLF: got %s, want NULL (no code-like word)", deref(crlf))
	}
	for _, doc := range docs {
		var got, old *string
		if err := pool.QueryRow(ctx, `SELECT search_code_text($1)`, doc).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, sqlOldCodeText, doc).Scan(&old); err != nil {
			t.Fatal(err)
		}
		switch {
		case got == nil && (old == nil || strings.TrimSpace(*old) == ""):
		case got != nil && old != nil && *got == *old:
		default:
			t.Errorf("search_code_text(%q): got %v, want %v (0017's answer, or NULL for whitespace)", doc, deref(got), deref(old))
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return "'" + *s + "'"
}
