package api

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/threadline/threadline/thread"
)

// TestAppendTokenLine checks that the token fast path writes exactly what
// json.Encoder writes for the event.
func TestAppendTokenLine(t *testing.T) {
	t.Parallel()
	texts := []string{"", " abcd", "Hel", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\r\x00\x1f\b\f",
		"\u2028\u2029", "héllo wörld ✓ 😀", "bad \xff\xfe utf-8", "del \x7f", "{\"json\":true}"}
	for _, text := range texts {
		ev := thread.Event{Type: thread.KindToken, RunID: uuid.New(), Sequence: 1234567890123, MessageID: uuid.New(), Text: text}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(ev); err != nil {
			t.Fatal(err)
		}
		if got := appendTokenLine(nil, &ev); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("appendTokenLine(%q) =\n%s\nwant\n%s", text, got, want.Bytes())
		}
	}
}

func BenchmarkTokenLine(b *testing.B) {
	ev := thread.Event{Type: thread.KindToken, RunID: uuid.New(), Sequence: 42, MessageID: uuid.New(), Text: " abcd"}
	b.Run("encoder", func(b *testing.B) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for b.Loop() {
			buf.Reset()
			_ = enc.Encode(ev)
		}
	})
	b.Run("append", func(b *testing.B) {
		var line []byte
		for b.Loop() {
			line = appendTokenLine(line[:0], &ev)
		}
	})
}
