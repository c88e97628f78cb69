package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

// closedWithin reports whether the server closes c within d (reading and
// discarding whatever it sends first), and what it sent.
func closedWithin(c net.Conn, d time.Duration) (bool, string) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	b, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false, string(b)
	}
	return true, string(b)
}

// TestServerTimeouts runs the real server with one-second timeouts: a
// stream three times longer than the write timeout completes, live and
// rejoined; an idle keep-alive, a silent new connection and a slow body
// are each closed.
func TestServerTimeouts(t *testing.T) {
	t.Parallel()
	s := startServer(t, pgtest.New(t), "THREADLINE_BUILTIN_DELAY=50ms", "THREADLINE_BUILTIN_TOKENS=60",
		"THREADLINE_READ_HEADER_TIMEOUT=1s", "THREADLINE_READ_TIMEOUT=1s", "THREADLINE_WRITE_TIMEOUT=1s", "THREADLINE_IDLE_TIMEOUT=1s")

	t.Run("stream outlives the write timeout", func(t *testing.T) {
		t.Parallel()
		tid := uuid.NewString()
		r := openRun(t, s.addr, tid, "a long one")
		first, err := readEvent(t, r)
		if err != nil {
			t.Fatal(err)
		}
		rejoin, err := http.Get("http://" + s.addr + "/api/v1/threads/" + tid + "/runs/" + first.RunID + "/stream?after=1")
		if err != nil {
			t.Fatal(err)
		}
		defer rejoin.Body.Close()
		for name, rd := range map[string]*bufio.Reader{"live": r, "rejoined": bufio.NewReader(rejoin.Body)} {
			var last ev
			for {
				e, err := readEvent(t, rd)
				if err != nil {
					break
				}
				last = e
			}
			if last.Type != "snapshot" || last.RunStatus != "succeeded" {
				t.Errorf("%s stream of a 3 s run under a 1 s write timeout: last event %+v, want a succeeded snapshot", name, last)
			}
		}
	})
	t.Run("idle keep-alive is closed", func(t *testing.T) {
		t.Parallel()
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		closed, got := closedWithin(c, 15*time.Second)
		if !closed || !strings.HasPrefix(got, "HTTP/1.1 200") {
			t.Fatalf("idle keep-alive: closed %v after %q, want a 200 and then the connection closed", closed, got)
		}
	})
	t.Run("silent connection is closed", func(t *testing.T) {
		t.Parallel()
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if closed, got := closedWithin(c, 15*time.Second); !closed {
			t.Fatalf("a connection that sends nothing: still open after 15 s (got %q)", got)
		}
	})
	t.Run("slow body is cut", func(t *testing.T) {
		t.Parallel()
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "POST /api/v1/threads HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		// One byte every 100 ms would take 20 s; the server must hang up
		// long before (its read timeout is 1 s).
		cut := make(chan struct{})
		go func() {
			defer close(cut)
			_, _ = io.ReadAll(c)
		}()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 199; i++ {
			select {
			case <-cut:
				return
			case <-tick.C:
				if _, err := io.WriteString(c, " "); err != nil {
					return // reset by the server: cut
				}
			}
		}
		t.Fatal("a body sent at 10 bytes/s for 20 s was never cut")
	})
}

// TestConnectionCap: connections over the cap are answered 503 with
// Retry-After at once and closed; once others close, requests go through.
func TestConnectionCap(t *testing.T) {
	t.Parallel()
	s := startServer(t, pgtest.New(t), "THREADLINE_MAX_CONNS=3")
	var held []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	// The held connections are accepted in order; give the server a
	// request on the last one so it is surely counted.
	if _, err := io.WriteString(held[2], "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := http.ReadResponse(bufio.NewReader(held[2]), nil); err != nil {
		t.Fatal(err)
	}
	// A raw connection that sends nothing: the refusal is written as soon
	// as the connection is accepted, so an http.Client could take it for an
	// unsolicited response, and a request written after the server closed
	// would draw a reset that can discard the answer.
	over, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	// Without a cap the server would wait for a request: fail, not hang.
	_ = over.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil {
		t.Fatalf("reading the answer over the cap: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("request over the cap of 3: got %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for _, c := range held {
		c.Close()
	}
	wait.Eventually(t, 30*time.Second, func() bool {
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get("http://" + s.addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "after the held connections closed: still refused")
}
