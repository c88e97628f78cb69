package store

// The binary codec of the run event log: segments of records, and the
// run_log rows that hold one segment per run.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// Segment encoding. A live segment holds token texts; a compact segment (the
// whole log of a finished run) holds only token lengths, because the texts
// are the assistant checkpoint's, and runs of tokens of one length as a
// count and that length (a tokenizer's tokens often repeat a length; the
// built-in model's always do). Layout: one format byte, then per record (or
// run of records) a kind byte and its fields as uvarint-length-prefixed
// strings / varints. recLength is read but no longer written.
const (
	segLive    = 'L'
	segCompact = 'C'

	recToken  = 't'
	recLength = 'n'
	recRun    = 'r' // uvarint count, uvarint length
	recSnap   = 's'
	recError  = 'e'

	// Agent records, written whole in both formats.
	recReasoning  = 'g'
	recToolCall   = 'c' // call id, tool name, arguments piece
	recToolResult = 'x' // call id, is-error byte, result
	recData       = 'd' // name, value
	// recSubagent is a child run's record in its parent's log: the
	// delegate call's id, the child's thread, run and message ids (16
	// bytes each), the child record's sequence, and the child record as a
	// live segment of one record (itself a subagent record for a
	// grandchild's).
	recSubagent = 'a'
)

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func encodeSegment(recs []thread.Record, compact bool, text string) ([]byte, error) {
	size := 1
	for _, r := range recs {
		size += len(r.Text) + 4
	}
	if compact {
		size = 1 + 2*len(recs) + 64
	}
	return appendSegment(make([]byte, 0, size), recs, compact, text)
}

// appendSegment appends recs encoded as one segment to b.
func appendSegment(b []byte, recs []thread.Record, compact bool, text string) ([]byte, error) {
	if compact {
		b = append(b, segCompact)
	} else {
		b = append(b, segLive)
	}
	off := 0
	for i := 0; i < len(recs); i++ {
		r := recs[i]
		switch r.Kind {
		case thread.KindToken:
			if compact {
				n := 0 // tokens in this run of one length
				for ; i+n < len(recs) && recs[i+n].Kind == thread.KindToken && len(recs[i+n].Text) == len(r.Text); n++ {
					t := recs[i+n].Text
					if off+len(t) > len(text) || text[off:off+len(t)] != t {
						return nil, fmt.Errorf("token %d is not in the reply text", recs[i+n].Seq)
					}
					off += len(t)
				}
				i += n - 1
				b = append(b, recRun)
				b = binary.AppendUvarint(b, uint64(n))
				b = binary.AppendUvarint(b, uint64(len(r.Text)))
			} else {
				b = append(b, recToken)
				b = appendString(b, r.Text)
			}
		case thread.KindSnapshot:
			b = append(b, recSnap)
			b = appendString(b, string(r.Status))
			b = binary.AppendVarint(b, r.TreeSeq)
		case thread.KindError:
			b = append(b, recError)
			b = appendString(b, string(r.Code))
			b = appendString(b, r.Text)
		default:
			var ok bool
			if b, ok = appendAgentRecord(b, &r); !ok {
				return nil, fmt.Errorf("record %d has unknown kind %q", r.Seq, r.Kind)
			}
		}
	}
	if compact && off != len(text) {
		return nil, fmt.Errorf("tokens cover %d of %d reply bytes", off, len(text))
	}
	return b, nil
}

// appendAgentRecord appends a record of an agent run's kinds; it reports
// false for any other kind.
func appendAgentRecord(b []byte, r *thread.Record) ([]byte, bool) {
	switch r.Kind {
	case thread.KindReasoning:
		b = append(b, recReasoning)
		return appendString(b, r.Text), true
	case thread.KindToolCall:
		b = append(b, recToolCall)
		b = appendString(b, r.CallID)
		b = appendString(b, r.Name)
		return appendString(b, r.Text), true
	case thread.KindToolResult:
		b = append(b, recToolResult)
		b = appendString(b, r.CallID)
		flag := byte(0)
		if r.IsError {
			flag = 1
		}
		b = append(b, flag)
		return appendString(b, string(r.Data)), true
	case thread.KindData:
		b = append(b, recData)
		b = appendString(b, r.Name)
		return appendString(b, string(r.Data)), true
	case thread.KindSubagent:
		if r.Sub == nil {
			return b, false
		}
		inner, err := appendSegment(nil, []thread.Record{r.Sub.Record}, false, "")
		if err != nil {
			return b, false
		}
		b = append(b, recSubagent)
		b = appendString(b, r.CallID)
		b = append(b, r.Sub.ThreadID[:]...)
		b = append(b, r.Sub.RunID[:]...)
		b = append(b, r.Sub.MessageID[:]...)
		b = binary.AppendVarint(b, r.Sub.Record.Seq)
		return appendString(b, string(inner)), true
	}
	return b, false
}

// readSubagent reads a subagent record's fields after its call id.
func readSubagent(b []byte, r *thread.Record) ([]byte, bool) {
	if len(b) < 48 {
		return nil, false
	}
	sub := &thread.SubRecord{}
	copy(sub.ThreadID[:], b[:16])
	copy(sub.RunID[:], b[16:32])
	copy(sub.MessageID[:], b[32:48])
	b = b[48:]
	seq, k := binary.Varint(b)
	if k <= 0 {
		return nil, false
	}
	b = b[k:]
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return nil, false
	}
	recs, err := decodeSegment(seq, seq, b[k:k+int(n)], "")
	if err != nil || len(recs) != 1 {
		return nil, false
	}
	sub.Record = recs[0]
	r.Kind, r.Sub = thread.KindSubagent, sub
	return b[k+int(n):], true
}

// readRecord reads the fields of a record of kind into r from b and
// returns the rest, for every kind but tokens (which decodeSegment reads
// itself, being nearly every record): snapshots, errors and an agent run's
// kinds. ok is false for another kind or a short segment.
func readRecord(kind byte, b []byte, r *thread.Record) (rest []byte, ok bool) {
	str := func() string {
		n, k := binary.Uvarint(b)
		if !ok || k <= 0 || uint64(len(b)-k) < n {
			ok = false
			return ""
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s
	}
	ok = true
	switch kind {
	case recSnap:
		r.Kind, r.Status = thread.KindSnapshot, thread.RunStatus(str())
		v, k := binary.Varint(b)
		if !ok || k <= 0 {
			return nil, false
		}
		r.TreeSeq, b = v, b[k:]
	case recError:
		r.Kind, r.Code = thread.KindError, errcode.Code(str())
		r.Text = str()
	case recReasoning:
		r.Kind, r.Text = thread.KindReasoning, str()
	case recToolCall:
		r.Kind, r.CallID, r.Name = thread.KindToolCall, str(), str()
		r.Text = str()
	case recToolResult:
		r.Kind, r.CallID = thread.KindToolResult, str()
		if !ok || len(b) == 0 || b[0] > 1 {
			return nil, false
		}
		r.IsError, b = b[0] == 1, b[1:]
		r.Data = rawJSON(str())
	case recData:
		r.Kind, r.Name = thread.KindData, str()
		r.Data = rawJSON(str())
	case recSubagent:
		r.CallID = str()
		if !ok {
			return nil, false
		}
		return readSubagent(b, r)
	default:
		return nil, false
	}
	return b, ok
}

// rawJSON is s as a JSON value; nil for "", as a record without one has.
func rawJSON(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

var errCorrupt = errors.New("corrupt run log segment")

// decodeSegment decodes the records first..last of a segment. text is the
// reply's text when the segment is compact (its tokens are slices of it,
// so decoding them allocates nothing), else "". It returns errCorrupt when
// the segment is cut, does not hold exactly those records, or its tokens
// do not cover text.
func decodeSegment(first, last int64, b []byte, text string) ([]thread.Record, error) {
	if len(b) == 0 {
		return nil, errCorrupt
	}
	compact := b[0] == segCompact
	b = b[1:]
	out := make([]thread.Record, 0, min(max(last-first+1, 0), 1<<16))
	readString := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return "", false
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, true
	}
	off := 0
	for seq := first; len(b) > 0; seq++ {
		kind := b[0]
		b = b[1:]
		r := thread.Record{Seq: seq}
		ok := true
		// The token cases are inline here, not readTokenLength and
		// readTokenRun as in walkSegment: every read of a whole log comes
		// through this loop, where a call per record shows.
		switch kind {
		case recToken:
			r.Kind = thread.KindToken
			r.Text, ok = readString()
		case recLength:
			n, k := binary.Uvarint(b)
			if k <= 0 || off+int(n) > len(text) {
				return nil, errCorrupt
			}
			b = b[k:]
			r.Kind, r.Text = thread.KindToken, text[off:off+int(n)]
			off += int(n)
		case recRun:
			count, k := binary.Uvarint(b)
			if k <= 0 || count == 0 {
				return nil, errCorrupt
			}
			b = b[k:]
			size, k := binary.Uvarint(b)
			if k <= 0 || size > uint64(len(text)) || count > uint64(last-seq+1) || off+int(count)*int(size) > len(text) {
				return nil, errCorrupt
			}
			b = b[k:]
			n := int(size)
			for j := range int(count) - 1 {
				out = append(out, thread.Record{Seq: seq + int64(j), Kind: thread.KindToken, Text: text[off : off+n]})
				off += n
			}
			seq += int64(count) - 1
			r.Seq, r.Kind, r.Text = seq, thread.KindToken, text[off:off+n]
			off += n
		default:
			b, ok = readRecord(kind, b, &r)
		}
		if !ok {
			return nil, errCorrupt
		}
		out = append(out, r)
	}
	if int64(len(out)) != last-first+1 || compact && off != len(text) {
		return nil, errCorrupt
	}
	return out, nil
}

// walkSegment decodes the records first..last of a segment as
// decodeSegment does, but calls fn with each one from sequence from on
// (the ones before it are only stepped over) until fn returns false,
// keeping none: a page of a long log is read without decoding it all. It
// returns errCorrupt for a segment it cannot read, and checks that the
// records cover first..last (and text) only when fn saw them all.
func walkSegment(first, last int64, b []byte, text string, from int64, fn func(*thread.Record) bool) error {
	if len(b) == 0 {
		return errCorrupt
	}
	compact := b[0] == segCompact
	b = b[1:]
	off := 0
	seq := first
	for ; len(b) > 0; seq++ {
		kind := b[0]
		b = b[1:]
		r := thread.Record{Seq: seq}
		ok := true
		switch kind {
		case recToken:
			n, k := binary.Uvarint(b)
			if k <= 0 || uint64(len(b)-k) < n {
				return errCorrupt
			}
			if seq >= from {
				r.Kind, r.Text = thread.KindToken, string(b[k:k+int(n)])
			}
			b = b[k+int(n):]
		case recLength:
			if r.Text, b, ok = readTokenLength(b, text, off); !ok {
				return errCorrupt
			}
			r.Kind = thread.KindToken
			off += len(r.Text)
		case recRun:
			var count uint64
			var n int
			if count, n, b, ok = readTokenRun(b, text, off, seq, last); !ok {
				return errCorrupt
			}
			var stop bool
			if seq, off, stop = walkTokenRun(seq, off, count, n, text, from, fn); stop {
				return nil
			}
			r.Seq, r.Kind, r.Text = seq, thread.KindToken, text[off:off+n]
			off += n
		default:
			b, ok = readRecord(kind, b, &r)
		}
		if !ok {
			return errCorrupt
		}
		if seq >= from && !fn(&r) {
			return nil
		}
	}
	if seq-1 != last || compact && off != len(text) {
		return errCorrupt
	}
	return nil
}

// readTokenLength reads a token given by its length at b (what compact
// segments held before runs): the next bytes of text from off. It returns
// the token and the rest of b; ok is false when b is cut or the token
// goes past text.
func readTokenLength(b []byte, text string, off int) (tok string, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(text)-off) {
		return "", nil, false
	}
	return text[off : off+int(n)], b[k:], true
}

// readTokenRun reads the head of a run of tokens of one length at b: how
// many, and their length. The run's first token is seq and starts at off
// in text. It returns the rest of b; ok is false when b is cut, the run is
// empty, or it goes past last or past text.
func readTokenRun(b []byte, text string, off int, seq, last int64) (count uint64, n int, rest []byte, ok bool) {
	count, k := binary.Uvarint(b)
	if k <= 0 || count == 0 {
		return 0, 0, nil, false
	}
	b = b[k:]
	size, k := binary.Uvarint(b)
	if k <= 0 || size > uint64(len(text)) || count > uint64(last-seq+1) || off+int(count)*int(size) > len(text) {
		return 0, 0, nil, false
	}
	return count, int(size), b[k:], true
}

// walkTokenRun calls fn, as walkSegment does, with the tokens of a run but
// its last: count tokens of n bytes, the first seq at text[off:]. It steps
// over the ones before from and returns the last token's sequence and
// offset, or stop when fn returned false.
func walkTokenRun(seq int64, off int, count uint64, n int, text string, from int64, fn func(*thread.Record) bool) (lastSeq int64, lastOff int, stop bool) {
	if skip := min(max(from-seq, 0), int64(count)-1); skip > 0 {
		seq += skip
		off += int(skip) * n
		count -= uint64(skip)
	}
	for range int(count) - 1 {
		if seq >= from && !fn(&thread.Record{Seq: seq, Kind: thread.KindToken, Text: text[off : off+n]}) {
			return seq, off, true
		}
		seq++
		off += n
	}
	return seq, off, false
}

// encodeLog is a run_log row for segs (see migration 0006), or nil when
// they hold no record.
func encodeLog(segs []thread.Segment) ([]byte, error) {
	size := 0
	for _, sg := range segs {
		size += 16 + 3*binary.MaxVarintLen32 + 1
		for _, r := range sg.Records {
			size += len(r.Text) + 4
		}
	}
	var b []byte
	for _, sg := range segs {
		if len(sg.Records) == 0 {
			continue
		}
		if b == nil {
			b = make([]byte, 0, size)
		}
		b = append(b, sg.RunID[:]...)
		b = binary.AppendUvarint(b, uint64(sg.Records[0].Seq))
		b = binary.AppendUvarint(b, uint64(sg.Records[len(sg.Records)-1].Seq))
		// The segment's length goes before it: reserve the most a length
		// can take, encode, then move the segment up to its real length.
		at := len(b)
		b = append(b, make([]byte, binary.MaxVarintLen32)...)
		seg, err := appendSegment(b, sg.Records, false, "")
		if err != nil {
			return nil, fmt.Errorf("append run events: %w", err)
		}
		n := len(seg) - at - binary.MaxVarintLen32
		k := len(binary.AppendUvarint(seg[at:at], uint64(n)))
		copy(seg[at+k:], seg[at+binary.MaxVarintLen32:])
		b = seg[:at+k+n]
	}
	return b, nil
}

// logSegments calls fn with each segment of a run_log row that belongs to
// run (every segment when run is uuid.Nil).
func logSegments(data []byte, run uuid.UUID, fn func(id uuid.UUID, first, last int64, seg []byte) error) error {
	for len(data) > 0 {
		if len(data) < 16 {
			return errCorrupt
		}
		id := uuid.UUID(data[:16])
		data = data[16:]
		var v [3]uint64
		for i := range v {
			x, k := binary.Uvarint(data)
			if k <= 0 {
				return errCorrupt
			}
			v[i], data = x, data[k:]
		}
		if v[2] > uint64(len(data)) || v[0] > v[1] {
			return errCorrupt
		}
		seg := data[:v[2]]
		data = data[v[2]:]
		if run == uuid.Nil || id == run {
			if err := fn(id, int64(v[0]), int64(v[1]), seg); err != nil {
				return err
			}
		}
	}
	return nil
}
