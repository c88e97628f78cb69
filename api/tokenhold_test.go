package api_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/threadline/threadline/thread/engine"
)

// streamChunks posts a run and returns its stream as the HTTP chunks the
// service wrote, read off a raw connection: one chunk per flush.
func (e *env) streamChunks(threadID string) [][]byte {
	e.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	body := `{"message":{"content":"hello"},"parent_message_id":null}`
	fmt.Fprintf(c, "POST /api/v1/threads/%s/runs/stream HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		threadID, len(body), body)
	tp := textproto.NewReader(bufio.NewReader(c))
	status, err := tp.ReadLine()
	if err != nil || !strings.Contains(status, " 200 ") {
		e.t.Fatalf("status line %q: %v", status, err)
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil || h.Get("Transfer-Encoding") != "chunked" {
		e.t.Fatalf("headers %v: %v", h, err)
	}
	var chunks [][]byte
	for {
		line, err := tp.ReadLine()
		if err != nil {
			e.t.Fatalf("chunk size: %v", err)
		}
		n, err := strconv.ParseInt(line, 16, 64)
		if err != nil {
			e.t.Fatalf("chunk size %q: %v", line, err)
		}
		if n == 0 {
			return chunks
		}
		b := make([]byte, n+2) // the chunk and its CRLF
		if _, err := io.ReadFull(tp.R, b); err != nil {
			e.t.Fatalf("chunk: %v", err)
		}
		chunks = append(chunks, b[:n])
	}
}

// tokenChunks counts the chunks that carry a token line.
func tokenChunks(chunks [][]byte) int {
	n := 0
	for _, c := range chunks {
		if bytes.Contains(c, []byte(`"type":"token"`)) {
			n++
		}
	}
	return n
}

// TestTokenHold: with a token hold (engine.Config.TokenHold) of an hour and
// a commit pace, a run's first token is committed and streamed at once and
// each later one waits for the next, so they are committed, published and
// streamed two at a time: every token arrives once, in order, in about
// half the writes.
func TestTokenHold(t *testing.T) {
	t.Parallel()
	e := setup(t, withTokens(20), withDelay(5*time.Millisecond), withService(func(c *engine.Config) { c.TokenHold, c.CommitPace = time.Hour, 2*time.Millisecond }))
	chunks := e.streamChunks(newID())
	evs := readEvents(t, bytes.NewReader(bytes.Join(chunks, nil)))
	checkRun(t, evs)
	if got := strings.Count(tokensText(evs), " "); got != 20 {
		t.Fatalf("got %d words of tokens, want the run's 20", got)
	}
	if got, want := tokenChunks(chunks), 1+20/2; got > want {
		t.Fatalf("tokens came in %d writes, want at most %d (the first token, then two a write)", got, want)
	}
}
