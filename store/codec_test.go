package store

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
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

// TestLogRowRoundTrip: a group commit's row holds each run's segment, read
// back by run; empty segments are left out, and a cut or inconsistent row
// is an error, never a wrong record.
func TestLogRowRoundTrip(t *testing.T) {
	t.Parallel()
	a, b := uuid.New(), uuid.New()
	long := thread.Record{Seq: 9, Kind: thread.KindToken, Text: strings.Repeat("é", 200)} // a 2-byte length
	segs := []thread.Segment{
		{RunID: a, Records: []thread.Record{{Seq: 2, Kind: thread.KindToken, Text: " x"}, {Seq: 3, Kind: thread.KindToken, Text: ""}}},
		{RunID: b},
		{RunID: b, Records: []thread.Record{long, {Seq: 10, Kind: thread.KindError, Code: "model_error", Text: "boom"}}},
	}
	row, err := encodeLog(segs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		run  uuid.UUID
		want string
	}{
		{a, fmt.Sprint(segs[0].Records)},
		{b, fmt.Sprint(segs[2].Records)},
		{uuid.New(), "[]"},
	} {
		var got []thread.Record
		err := logSegments(row, tc.run, func(id uuid.UUID, first, last int64, seg []byte) error {
			recs, err := decodeSegment(first, last, seg, "")
			got = append(got, recs...)
			return err
		})
		if err != nil || fmt.Sprint(got) != tc.want && !(len(got) == 0 && tc.want == "[]") {
			t.Errorf("run %s: got %v (%v), want %s", tc.run, got, err, tc.want)
		}
	}
	var n int
	if err := logSegments(row, uuid.Nil, func(uuid.UUID, int64, int64, []byte) error { n++; return nil }); err != nil || n != 2 {
		t.Errorf("every segment: got %d (%v), want 2 (the empty one is not written)", n, err)
	}
	if empty, err := encodeLog([]thread.Segment{{RunID: a}}); empty != nil || err != nil {
		t.Errorf("no records: got %v (%v), want no row", empty, err)
	}
	// A cut can fall exactly between two segments: the first run's alone.
	firstOnly, err := encodeLog(segs[:1])
	if err != nil {
		t.Fatal(err)
	}
	for cut := 1; cut < len(row); cut++ {
		err := logSegments(row[:cut], uuid.Nil, func(_ uuid.UUID, first, last int64, seg []byte) error {
			_, err := decodeSegment(first, last, seg, "")
			return err
		})
		if err == nil && cut != len(firstOnly) {
			t.Errorf("row cut at %d of %d: got no error", cut, len(row))
		}
	}
}

// TestSegmentCut: every cut of a segment, live or compact, decodes to an
// error, never to fewer or wrong records.
func TestSegmentCut(t *testing.T) {
	t.Parallel()
	recs := []thread.Record{
		{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: 3},
		{Seq: 2, Kind: thread.KindToken, Text: "Hel"},
		{Seq: 3, Kind: thread.KindToken, Text: "lo "},
		{Seq: 4, Kind: thread.KindToken, Text: "wörld"},
		{Seq: 5, Kind: thread.KindError, Code: "model_error", Text: "boom"},
		{Seq: 6, Kind: thread.KindSnapshot, Status: thread.RunFailed, TreeSeq: 5},
	}
	const text = "Hello wörld"
	for _, compact := range []bool{false, true} {
		in := ""
		if compact {
			in = text
		}
		data, err := encodeSegment(recs, compact, text)
		if err != nil {
			t.Fatalf("compact %v: encode: %v", compact, err)
		}
		for cut := 0; cut < len(data); cut++ {
			if got, err := decodeSegment(1, 6, data[:cut], in); err == nil {
				t.Errorf("compact %v: cut at %d of %d: got %v, want an error", compact, cut, len(data), got)
			}
		}
	}
}

// TestSegmentUnknownKind: a record kind the codec does not know is refused
// when encoding and when decoding.
func TestSegmentUnknownKind(t *testing.T) {
	t.Parallel()
	if _, err := encodeSegment([]thread.Record{{Seq: 1, Kind: "mystery"}}, false, ""); err == nil {
		t.Errorf("encode of an unknown kind: got no error, want one")
	}
	if got, err := decodeSegment(1, 1, []byte{segLive, 'z'}, ""); err == nil {
		t.Errorf("decode of an unknown kind: got %v, want an error", got)
	}
}

// TestAgentRecordsRoundTrip: reasoning, tool calls, tool results and data
// records survive both formats between tokens, and a cut agent record is
// corrupt, never a wrong record.
func TestAgentRecordsRoundTrip(t *testing.T) {
	t.Parallel()
	recs := []thread.Record{
		{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: 3},
		{Seq: 2, Kind: thread.KindReasoning, Text: "Let me think"},
		{Seq: 3, Kind: thread.KindToken, Text: "I'll "},
		{Seq: 4, Kind: thread.KindToken, Text: "add."},
		{Seq: 5, Kind: thread.KindToolCall, CallID: "c1", Name: "calculator"},
		{Seq: 6, Kind: thread.KindToolCall, CallID: "c1", Name: "calculator", Text: `{"expression":"12*7"}`},
		{Seq: 7, Kind: thread.KindToolResult, CallID: "c1", Data: []byte(`84`)},
		{Seq: 8, Kind: thread.KindToolResult, CallID: "c2", Data: []byte(`"timed out"`), IsError: true},
		{Seq: 9, Kind: thread.KindData, Name: "plan", Data: []byte(`{"id":"p","tasks":[]}`)},
		{Seq: 10, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: 3},
		{Seq: 11, Kind: thread.KindToken, Text: "84"},
		{Seq: 12, Kind: thread.KindSnapshot, Status: thread.RunSucceeded, TreeSeq: 4},
	}
	text := "I'll add.84"
	for _, compact := range []bool{false, true} {
		data, err := encodeSegment(recs, compact, text)
		if err != nil {
			t.Fatalf("compact %v: encode: %v", compact, err)
		}
		in := ""
		if compact {
			in = text
		}
		got, err := decodeSegment(1, 12, data, in)
		if err != nil {
			t.Fatalf("compact %v: decode: %v", compact, err)
		}
		if g, w := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", recs); g != w {
			t.Fatalf("compact %v:\n got %s\nwant %s", compact, g, w)
		}
		if !compact {
			for cut := 1; cut < len(data); cut++ {
				if got, err := decodeSegment(1, 12, data[:cut], ""); err == nil {
					t.Fatalf("a segment cut at %d of %d bytes decoded: %v", cut, len(data), got)
				}
			}
		}
	}
}

// TestDecodeSegmentAllocs: a compact segment's tokens are slices of the
// reply's text, so decoding one allocates the record slice and nothing per
// token; a live segment's tokens are a string each. Not parallel:
// testing.AllocsPerRun refuses to run in a parallel test.
func TestDecodeSegmentAllocs(t *testing.T) {
	var recs []thread.Record
	var text strings.Builder
	for i := range 200 {
		tok := " abcd"
		if i%7 == 0 {
			tok = " xy" // runs of one length, and of another
		}
		recs = append(recs, thread.Record{Seq: int64(i + 1), Kind: thread.KindToken, Text: tok})
		text.WriteString(tok)
	}
	last := int64(len(recs))
	for _, compact := range []bool{true, false} {
		in, want := "", float64(1+len(recs))
		if compact {
			in, want = text.String(), 1
		}
		data, err := encodeSegment(recs, compact, in)
		if err != nil {
			t.Fatalf("compact %v: encode: %v", compact, err)
		}
		got := testing.AllocsPerRun(20, func() {
			if _, err := decodeSegment(1, last, data, in); err != nil {
				t.Fatalf("compact %v: decode: %v", compact, err)
			}
		})
		if got != want {
			t.Errorf("compact %v: decoding %d tokens: got %v allocations, want %v", compact, len(recs), got, want)
		}
	}
}

// TestWalkSegmentMatchesDecode: walking a segment from any sequence gives
// the records decodeSegment gives from there, in both formats, runs of
// tokens entered in their middle included; stopping early stops at the
// record fn refused; a cut segment walked whole is corrupt.
func TestWalkSegmentMatchesDecode(t *testing.T) {
	t.Parallel()
	recs := []thread.Record{{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: 3}}
	var text strings.Builder
	for i, tok := range []string{" ab", " ab", " ab", "c", " ab", "", "", "日本", " ab", " ab"} {
		recs = append(recs, thread.Record{Seq: int64(i + 2), Kind: thread.KindToken, Text: tok})
		text.WriteString(tok)
	}
	recs = append(recs, thread.Record{Seq: int64(len(recs) + 1), Kind: thread.KindSnapshot, Status: thread.RunSucceeded, TreeSeq: 4})
	last := int64(len(recs))
	for _, compact := range []bool{false, true} {
		in := ""
		if compact {
			in = text.String()
		}
		data, err := encodeSegment(recs, compact, text.String())
		if err != nil {
			t.Fatalf("compact %v: encode: %v", compact, err)
		}
		for from := int64(1); from <= last+1; from++ {
			var got []thread.Record
			err := walkSegment(1, last, data, in, from, func(r *thread.Record) bool {
				got = append(got, *r)
				return true
			})
			if want := recs[from-1:]; err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("compact %v, from %d: got %v (%v), want %v", compact, from, got, err, want)
			}
			var seen []int64
			err = walkSegment(1, last, data, in, from, func(r *thread.Record) bool {
				seen = append(seen, r.Seq)
				return len(seen) < 2
			})
			if want := min(2, last-from+1); err != nil || int64(len(seen)) != want || len(seen) > 0 && seen[0] != from {
				t.Errorf("compact %v, from %d, stopping at the second record: saw %v (%v), want %d records from %d", compact, from, seen, err, want, from)
			}
		}
		for cut := 0; cut < len(data); cut++ {
			if err := walkSegment(1, last, data[:cut], in, 1, func(*thread.Record) bool { return true }); err == nil {
				t.Errorf("compact %v: walk of a cut at %d of %d: got no error, want one", compact, cut, len(data))
			}
		}
	}
}

// TestUUIDArrayAllocs: encoding a []uuid.UUID allocates no more for many
// ids than for one (pgx's own path allocated once per id, and a
// group commit sends one per commit). Not parallel: AllocsPerRun.
func TestUUIDArrayAllocs(t *testing.T) {
	m := pgtype.NewMap()
	registerUUID(m)
	many := make([]uuid.UUID, 100)
	for i := range many {
		many[i] = uuid.New()
	}
	var buf []byte
	var err error
	allocs := func(ids []uuid.UUID) float64 {
		return testing.AllocsPerRun(50, func() {
			buf, err = m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, ids, buf[:0])
		})
	}
	one, hundred := allocs(many[:1]), allocs(many)
	if err != nil || hundred > one {
		t.Fatalf("encoding 100 ids: %v allocations against %v for one (err %v), want no more", hundred, one, err)
	}
}

// TestSubagentRecordsRoundTrip: a child's records in its parent's log
// (every kind a child streams) decode to what was written, in both
// formats, and a cut segment does not decode.
func TestSubagentRecordsRoundTrip(t *testing.T) {
	t.Parallel()
	child := thread.SubRecord{ThreadID: uuid.New(), RunID: uuid.New(), MessageID: uuid.New()}
	sub := func(r thread.Record) *thread.SubRecord { c := child; c.Record = r; return &c }
	recs := []thread.Record{
		{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: 1},
		{Seq: 2, Kind: thread.KindToolCall, CallID: "c1", Name: "delegate", Text: `{"task":"x"}`},
		{Seq: 3, Kind: thread.KindSubagent, CallID: "c1", Sub: sub(thread.Record{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: 1})},
		{Seq: 4, Kind: thread.KindSubagent, CallID: "c1", Sub: sub(thread.Record{Seq: 2, Kind: thread.KindToken, Text: "hé"})},
		{Seq: 5, Kind: thread.KindSubagent, CallID: "c1", Sub: sub(thread.Record{Seq: 3, Kind: thread.KindToolResult, CallID: "k", Data: []byte(`1`), IsError: true})},
		{Seq: 6, Kind: thread.KindSubagent, CallID: "c1", Sub: sub(thread.Record{Seq: 4, Kind: thread.KindError, Code: "model_error", Text: "boom"})},
		{Seq: 7, Kind: thread.KindToolResult, CallID: "c1", Data: []byte(`"done"`)},
		{Seq: 8, Kind: thread.KindToken, Text: "ok"},
		{Seq: 9, Kind: thread.KindSnapshot, Status: thread.RunSucceeded, TreeSeq: 2},
	}
	for _, compact := range []bool{false, true} {
		data, err := encodeSegment(recs, compact, "ok")
		if err != nil {
			t.Fatalf("compact %v: encode: %v", compact, err)
		}
		in := ""
		if compact {
			in = "ok"
		}
		got, err := decodeSegment(1, 9, data, in)
		if err != nil {
			t.Fatalf("compact %v: decode: %v", compact, err)
		}
		if !reflect.DeepEqual(got, recs) {
			t.Fatalf("compact %v:\n got %+v\nwant %+v", compact, got, recs)
		}
		for cut := 1; cut < len(data); cut++ {
			if got, err := decodeSegment(1, 9, data[:cut], in); err == nil {
				t.Fatalf("a segment cut at %d of %d bytes decoded: %v", cut, len(data), got)
			}
		}
	}
}
