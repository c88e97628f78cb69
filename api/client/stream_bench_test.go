package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
)

// BenchmarkRunEvents is the client's cost of reading a stream: a run of
// 1,000 token lines and a final snapshot of two messages, from memory,
// through Run.Next (line split, JSON decode, sequence check).
func BenchmarkRunEvents(b *testing.B) {
	const tokens = 1000
	run, msg := "0b6f4bde-7c5a-4c4e-9d1e-4f3c5e6a7b8c", "5f0c9c1e-2b3a-4d5e-8f70-1a2b3c4d5e6f"
	var body bytes.Buffer
	for i := 1; i <= tokens; i++ {
		fmt.Fprintf(&body, `{"type":"token","run_id":%q,"sequence":%d,"message_id":%q,"text":"word%d "}`+"\n", run, i, msg, i)
	}
	fmt.Fprintf(&body, `{"type":"snapshot","run_id":%q,"sequence":%d,"thread_id":%q,"checkpoint_id":%q,"run_status":"succeeded",`+
		`"messages":[{"id":%q,"role":"user","content":[{"type":"text","text":"hello"}],"createdAt":"2026-11-26T10:00:00.123456Z","attachments":[],"metadata":{"custom":{"checkpointId":%q,"parentCheckpointId":null,"runId":%q}}},`+
		`{"id":%q,"role":"assistant","content":[{"type":"text","text":"word1 word2"}],"createdAt":"2026-11-26T10:00:01.123456Z","status":{"type":"complete","reason":"stop"},"metadata":{"runId":%q,"custom":{"checkpointId":%q,"parentCheckpointId":%q,"runId":%q}}}],`+
		`"messageRepository":{"headId":%q,"messages":[]}}`+"\n", run, tokens+1, run, run, run, run, run, msg, run, run, run, run, msg)
	data := body.Bytes()
	c := New("http://127.0.0.1:1")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r := &Run{c: c, ctx: context.Background(), RunID: run}
		r.attach(io.NopCloser(bytes.NewReader(data)))
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF { // Next's own end
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != tokens+1 {
			b.Fatalf("read %d events, want %d", n, tokens+1)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(tokens+1)), "ns/event")
}
