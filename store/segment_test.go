package store

import (
	"fmt"
	"strings"
	"testing"

	"github.com/threadline/threadline/thread"
)

// TestSegmentRoundTrip encodes logs live and compact and decodes them back:
// runs of equal token lengths, empty tokens, multi-byte text, snapshots and
// errors in between.
func TestSegmentRoundTrip(t *testing.T) {
	t.Parallel()
	snap := func(seq int64, st thread.RunStatus) thread.Record {
		return thread.Record{Seq: seq, Kind: thread.KindSnapshot, Status: st, TreeSeq: 7}
	}
	for _, toks := range [][]string{
		{},
		{" abcd", " efgh", " ijkl"},
		{"a", "bb", "cc", "", "", "ddd", "é", "ü", "日本", " end"},
		strings.Split(strings.Repeat(" wxyz", 300), ""),
	} {
		recs := []thread.Record{snap(1, thread.RunRunning)}
		var text strings.Builder
		for _, tok := range toks {
			recs = append(recs, thread.Record{Seq: int64(len(recs) + 1), Kind: thread.KindToken, Text: tok})
			text.WriteString(tok)
		}
		recs = append(recs, thread.Record{Seq: int64(len(recs) + 1), Kind: thread.KindError, Code: "model_error", Text: "boom"})
		recs = append(recs, snap(int64(len(recs)+1), thread.RunFailed))
		last := recs[len(recs)-1].Seq
		for _, compact := range []bool{false, true} {
			name := fmt.Sprintf("%d tokens, compact %v", len(toks), compact)
			data, err := encodeSegment(recs, compact, text.String())
			if err != nil {
				t.Fatalf("%s: encode: %v", name, err)
			}
			in := ""
			if compact {
				in = text.String()
			}
			got, err := decodeSegment(1, last, data, in)
			if err != nil {
				t.Fatalf("%s: decode: %v", name, err)
			}
			if fmt.Sprint(got) != fmt.Sprint(recs) {
				t.Fatalf("%s: got %v, want %v", name, got, recs)
			}
			if compact && len(toks) >= 300 && len(data) > 64 {
				t.Fatalf("%s: %d bytes; want the tokens of one length as one run", name, len(data))
			}
			// A segment that claims more or fewer records is corrupt.
			if _, err := decodeSegment(1, last+1, data, in); err == nil {
				t.Fatalf("%s: decoding with one record too many succeeded", name)
			}
		}
		if _, err := encodeSegment(recs, true, text.String()+"x"); err == nil {
			t.Fatalf("compact encoding of tokens that do not cover the reply succeeded")
		}
	}
}
