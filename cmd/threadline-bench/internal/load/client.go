package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/threadline/threadline/api/client"
)

// loadClient is one run's client.
type loadClient struct {
	idx      int
	threadID uuid.UUID
	prompt   string
	dropAt   int // tokens to read on the first connection before dropping; 0: never
	pause    time.Duration
	start    time.Duration // offset in the ramp

	sent      time.Time // the POST was sent
	firstAt   time.Time // the first snapshot was read
	runID     string
	msgID     string
	lastSeq   int64
	text      strings.Builder
	tokens    int64 // token events read, repeats included
	arrivals  []time.Time
	conns     []int8      // connection index of each token, by sequence
	connSent  []time.Time // when each connection's request was sent
	final     string      // final run_status
	finalTxt  string
	finalSet  bool
	rejoined  bool
	unplanned int
	errs      []string
	mismatch  []string
	created   time.Time // the run's created_at
}

func (c *loadClient) fail(format string, a ...any) {
	c.errs = append(c.errs, fmt.Sprintf("run %d: "+format, append([]any{c.idx}, a...)...))
}

func (c *loadClient) mis(format string, a ...any) {
	c.mismatch = append(c.mismatch, fmt.Sprintf("run %d: "+format, append([]any{c.idx}, a...)...))
}

// loadEvent is a stream event as the Go client decodes it (tokens
// through loadFastToken's direct path).
type loadEvent = client.Event

// loadTarget is the service under load.
type loadTarget struct {
	base  string
	pid   int
	dbURL string // the service's database, "" if unknown
	child *loadChild
	key   string
}

// stats counters shown in progress lines.
type loadProgress struct {
	started, streaming, done, failed, rejoins atomic.Int64
	tokens                                    atomic.Int64
}

// loadRunClient runs one client: the run's stream, maybe a drop and a
// rejoin, and rejoins after a stream that ends early (as the web app does).
func loadRunClient(ctx context.Context, hc *http.Client, tgt loadTarget, c *loadClient, o loadOpts, prog *loadProgress, t0 time.Time) {
	c.arrivals = make([]time.Time, o.tokens+2)
	c.conns = make([]int8, o.tokens+2)
	defer func() {
		if len(c.errs) > 0 || !c.finalSet {
			prog.failed.Add(1)
		} else {
			prog.done.Add(1)
		}
	}()
	if d := time.Until(t0.Add(c.start)); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			c.fail("not started: %v", ctx.Err())
			return
		}
	}
	prog.started.Add(1)
	body := fmt.Sprintf(`{"message":{"content":%q},"on_disconnect":"continue"}`, c.prompt)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tgt.base+"/api/v1/threads/"+c.threadID.String()+"/runs/stream", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	if tgt.key != "" {
		req.Header.Set("Authorization", "Bearer "+tgt.key)
	}
	conn := 0
	dropAt := c.dropAt
	for {
		sent := time.Now()
		c.connSent = append(c.connSent, sent)
		if conn == 0 {
			c.sent = sent
		}
		resp, err := hc.Do(req)
		if err != nil {
			c.fail("connection %d: %v", conn, err)
			return
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			c.fail("connection %d: status %d: %s", conn, resp.StatusCode, bytes.TrimSpace(b))
			return
		}
		prog.streaming.Add(1)
		dropped, err := loadRead(resp.Body, c, conn, dropAt, prog)
		resp.Body.Close()
		prog.streaming.Add(-1)
		if c.finalSet {
			return
		}
		if ctx.Err() != nil {
			c.fail("stream cut by the time bound at sequence %d", c.lastSeq)
			return
		}
		if c.runID == "" {
			c.fail("connection %d ended before the first event: %v", conn, err)
			return
		}
		pause := c.pause
		if dropped {
			c.rejoined = true
		} else {
			// Not planned: the stream ended early or broke.
			c.unplanned++
			if c.unplanned > 3 {
				c.fail("stream ended early %d times; last at sequence %d: %v", c.unplanned, c.lastSeq, err)
				return
			}
			pause = 100 * time.Millisecond
		}
		prog.rejoins.Add(1)
		dropAt = 0
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			c.fail("not rejoined: %v", ctx.Err())
			return
		}
		conn++
		u := fmt.Sprintf("%s/api/v1/threads/%s/runs/%s/stream?after=%d", tgt.base, c.threadID, c.runID, c.lastSeq)
		req, _ = http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		req.Header.Set("Accept", "application/x-ndjson")
		if tgt.key != "" {
			req.Header.Set("Authorization", "Bearer "+tgt.key)
		}
	}
}

// loadRead reads one connection's NDJSON lines, each stamped when its line
// is complete. It returns dropped=true when the client hung up on purpose,
// else the read's or a line's error, or nil after the final snapshot.
func loadRead(body io.Reader, c *loadClient, conn, dropAt int, prog *loadProgress) (dropped bool, err error) {
	lines := loadLines{br: bufio.NewReaderSize(body, 32<<10)}
	read := 0
	for {
		line, now, err := lines.next()
		if err != nil {
			return false, err
		}
		var ev loadEvent
		if err := loadDecode(line, &ev); err != nil {
			c.mis("connection %d: bad line %.80q: %v", conn, line, err)
			return false, err
		}
		c.sequenced(conn, ev.Sequence)
		switch ev.Type {
		case "snapshot":
			if c.snapshot(&ev, now) {
				return false, nil
			}
		case "token":
			c.token(&ev, now, conn, prog)
			read++
			if dropAt > 0 && read >= dropAt {
				return true, nil
			}
		case "error":
			c.fail("error event %s: %s", ev.Code, ev.Error)
		}
		if ev.RunID != c.runID {
			c.mis("event %d names run %s, want %s", ev.Sequence, ev.RunID, c.runID)
		}
	}
}

// loadLines splits a stream into its non-blank NDJSON lines, of any
// length.
type loadLines struct {
	br   *bufio.Reader
	long []byte // the start of a line longer than br's buffer
}

// next returns the next non-blank line, valid until the next call, and
// when it was complete. It returns io.ErrUnexpectedEOF when the stream
// ends, or the read's error; a last line without its newline is an error
// too, as the stream was cut.
func (l *loadLines) next() (line []byte, now time.Time, err error) {
	for {
		line, err := l.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			l.long = append(l.long, line...)
			continue
		}
		now := time.Now()
		if l.long != nil {
			line = append(l.long, line...)
			l.long = nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			if err == io.EOF {
				return nil, now, io.ErrUnexpectedEOF
			}
			if err != nil {
				return nil, now, err
			}
			continue
		}
		if err != nil {
			return nil, now, fmt.Errorf("partial line: %w", err)
		}
		return line, now, nil
	}
}

// sequenced notes an event's sequence read on connection conn: one after
// the last, else a mismatch.
func (c *loadClient) sequenced(conn int, seq int64) {
	if seq != c.lastSeq+1 {
		c.mis("connection %d: sequence %d after %d (gap or repeat)", conn, seq, c.lastSeq)
	}
	if seq > c.lastSeq {
		c.lastSeq = seq
	}
}

// snapshot takes the run and its reply from the first snapshot, read at
// now, and the final status and reply text from a final one. It reports
// whether ev was final.
func (c *loadClient) snapshot(ev *loadEvent, now time.Time) (final bool) {
	if c.runID == "" {
		c.runID, c.firstAt = ev.RunID, now
		if ev.Repository != nil && ev.Repository.HeadID != nil {
			c.msgID = *ev.Repository.HeadID
		}
	}
	if ev.RunStatus == "running" || ev.RunStatus == "" {
		return false
	}
	c.final, c.finalSet = ev.RunStatus, true
	for _, m := range ev.Messages {
		if m.ID == c.msgID {
			c.finalTxt = m.Text()
		}
	}
	return true
}

// token counts a token read at now on connection conn and keeps its
// arrival and text, once per sequence; a token of another reply, or one
// repeated or out of range, is a mismatch.
func (c *loadClient) token(ev *loadEvent, now time.Time, conn int, prog *loadProgress) {
	c.tokens++
	prog.tokens.Add(1)
	if ev.MessageID != c.msgID {
		c.mis("token %d names message %s, want %s", ev.Sequence, ev.MessageID, c.msgID)
	}
	if s := ev.Sequence; s >= 0 && s < int64(len(c.arrivals)) && c.arrivals[s].IsZero() {
		c.arrivals[s], c.conns[s] = now, int8(min(conn, 127))
		c.text.WriteString(ev.Text)
	} else {
		c.mis("token sequence %d repeated or out of range", s)
	}
}

// loadDecode decodes one NDJSON line as encoding/json would. Token lines
// in the exact layout the service writes, with a text that needs no
// unescaping, take a direct path: they are nearly every line, and
// encoding/json's reflection was a quarter of the load generator's CPU,
// taken from the same two cores as the service it measures.
func loadDecode(line []byte, ev *loadEvent) error {
	if loadFastToken(line, ev) {
		return nil
	}
	*ev = loadEvent{}
	return json.Unmarshal(line, ev)
}

func loadFastToken(line []byte, ev *loadEvent) bool {
	b, ok := bytes.CutPrefix(bytes.TrimRight(line, "\n"), []byte(`{"type":"token","run_id":"`))
	if !ok || len(b) < 36 || !loadPlainUUID(b[:36]) {
		return false
	}
	runID := b[:36]
	if b, ok = bytes.CutPrefix(b[36:], []byte(`","sequence":`)); !ok {
		return false
	}
	n := 0
	for n < len(b) && n < 18 && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	if n == 0 || n > 1 && b[0] == '0' {
		return false
	}
	seq, err := strconv.ParseInt(string(b[:n]), 10, 64)
	if err != nil {
		return false
	}
	if b, ok = bytes.CutPrefix(b[n:], []byte(`,"message_id":"`)); !ok || len(b) < 36 || !loadPlainUUID(b[:36]) {
		return false
	}
	msgID := b[:36]
	if b, ok = bytes.CutPrefix(b[36:], []byte(`","text":"`)); !ok {
		return false
	}
	text, ok := bytes.CutSuffix(b, []byte(`"}`))
	if !ok || !utf8.Valid(text) {
		return false
	}
	for _, c := range text {
		if c < 0x20 || c == '"' || c == '\\' {
			return false // escapes and quotes: encoding/json decides
		}
	}
	*ev = loadEvent{Type: "token", RunID: string(runID), Sequence: seq, MessageID: string(msgID), Text: string(text)}
	return true
}

// loadPlainUUID reports whether b is 36 bytes of hex digits and dashes:
// nothing a JSON string would escape.
func loadPlainUUID(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '-') {
			return false
		}
	}
	return true
}

// loadWarmup sends rounds of concurrent light requests that each take a
// database connection (thread list, an unknown thread, readiness), so the
// measured window does not pay for opening the pool's connections.
// loadPreconnect leaves n keep-alive connections idle in the client's
// transport: n concurrent light requests that each keep their response
// unread (so their connection busy) until all n have one, which makes the
// transport dial a connection for each, then release them together. It
// returns how many connections the transport dialed in all.
func loadPreconnect(ctx context.Context, hc *http.Client, tgt loadTarget, n int, dials *atomic.Int64) int {
	var got, done sync.WaitGroup
	release := make(chan struct{})
	for range n {
		got.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tgt.base+"/healthz", nil)
			resp, err := hc.Do(req)
			got.Done()
			if err != nil {
				return
			}
			select {
			case <-release:
			case <-ctx.Done():
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	got.Wait()
	close(release)
	done.Wait()
	return int(dials.Load())
}

func loadWarmup(ctx context.Context, hc *http.Client, tgt loadTarget, conns int) {
	paths := []string{"/api/v1/threads?limit=1", "/api/v1/threads/" + uuid.NewString() + "/messages", "/readyz"}
	for round := 0; round < 3; round++ {
		var wg sync.WaitGroup
		for i := 0; i < 2*max(conns, 8); i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tgt.base+paths[i%len(paths)], nil)
				if tgt.key != "" {
					req.Header.Set("Authorization", "Bearer "+tgt.key)
				}
				if resp, err := hc.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}
		wg.Wait()
	}
}

// loadFetchCreated reads each run's created_at.
func loadFetchCreated(ctx context.Context, hc *http.Client, tgt loadTarget, clients []*loadClient) {
	ch := make(chan *loadClient)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range ch {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tgt.base+"/api/v1/threads/"+c.threadID.String()+"/runs/"+c.runID, nil)
				if tgt.key != "" {
					req.Header.Set("Authorization", "Bearer "+tgt.key)
				}
				resp, err := hc.Do(req)
				if err != nil {
					continue
				}
				var r struct {
					CreatedAt time.Time `json:"created_at"`
				}
				if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&r) == nil {
					c.created = r.CreatedAt
				}
				resp.Body.Close()
			}
		}()
	}
	for _, c := range clients {
		if c.runID != "" {
			ch <- c
		}
	}
	close(ch)
	wg.Wait()
}
