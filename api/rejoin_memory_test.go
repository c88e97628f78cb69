package api_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/threadline/threadline/api"
	"github.com/threadline/threadline/thread/engine"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

// heapInuse is the heap in use after a collection.
func heapInuse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// stalledRejoin rejoins the run on a raw connection with a 4 KiB receive
// buffer, reads the first ten events and then nothing more: the server's
// writes block once the sockets' buffers are full.
func stalledRejoin(t *testing.T, e *env, tid, run string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET /api/v1/threads/%s/runs/%s/stream HTTP/1.1\r\nHost: x\r\n\r\n", tid, run)
	t.Cleanup(func() { c.Close() })
	br := bufio.NewReaderSize(c, 1024)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("rejoin: %v %v", err, resp)
	}
	r := bufio.NewReader(resp.Body)
	for range 10 {
		nextEvent(t, r)
	}
	return c
}

// TestStalledRejoinersBounded: rejoiners of a finished 100,000-token run
// that stop reading hold about a page of its log each (LogPageBytes), not
// the whole log: the log is read a page at a time and turned into events
// a chunk at a time. The issue measured 50 such rejoiners at about 1 GB.
//
// Not parallel: it measures the process's heap, which other tests would
// move.
func TestStalledRejoinersBounded(t *testing.T) {
	const (
		rejoiners = 20
		page      = 256 << 10
		// perStream is what one stalled stream may hold: its page (a
		// slice may have grown to twice what it holds), a chunk of
		// events, its buffers and its request's state, and while it
		// reads a page (under the race detector some still do when
		// measured) the run's reply and stored rows for a moment.
		perStream = 2*page + 1<<20
		slack     = 16 << 20 // the process's own, unrelated to the streams
	)
	e := setup(t, withTokens(100000),
		withService(func(c *engine.Config) { c.Limits.LogPageBytes = page }),
		withAPI(func(c *api.Config) { c.StallTimeout = -1 }))
	tid := newID()
	resp, b := e.do("POST", "/api/v1/threads/"+tid+"/runs/stream", newMessage("long", nil))
	wantStatus(t, resp, b, http.StatusOK, "")
	if len(b) < 6<<20 {
		t.Fatalf("the run's stream is %d bytes; it must be over what socket buffers hold (6 MiB) to stall", len(b))
	}
	logBytes := len(b)
	run := resp.Header.Get("X-Run-Id")
	b = nil
	goroutines := runtime.NumGoroutine()
	base := heapInuse()

	conns := make([]net.Conn, rejoiners)
	for i := range conns {
		conns[i] = stalledRejoin(t, e, tid, run)
	}
	bound := int64(rejoiners*perStream + slack)
	var held int64
	wait.Eventually(t, streamsBound, func() bool {
		held = heapInuse() - base
		return held <= bound
	}, "waited %v for the heap held by %d stalled rejoiners to fall under %d bytes", streamsBound, rejoiners, bound)
	if n := e.streamsOpen(); n != rejoiners {
		t.Fatalf("streams open while measured: got %d, want %d (all stalled, none done)", n, rejoiners)
	}
	t.Logf("%d rejoiners of a %d-byte stream, stalled: %d bytes held in all (%d each; bound %d, page %d)",
		rejoiners, logBytes, held, held/rejoiners, bound, page)

	for _, c := range conns {
		c.Close()
	}
	wait.Eventually(t, streamsBound, func() bool { return e.streamsOpen() == 0 }, "waited %v for the streams to end", streamsBound)
	// A few goroutines may come and go meanwhile that are not the streams'
	// (the test client's keep-alive connection to /metrics, the pool's):
	// a stalled stream that did not end would leave more than them.
	wait.Eventually(t, streamsBound, func() bool { return runtime.NumGoroutine() <= goroutines+rejoiners/2 },
		"goroutines: got %v %v after the streams ended, want at most %d; they are:\n%v",
		func() any { return runtime.NumGoroutine() }, streamsBound, goroutines+rejoiners/2, func() any {
			var dump strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&dump, 1)
			return dump.String()
		})
	wait.Eventually(t, streamsBound, func() bool {
		held = heapInuse() - base
		return held <= slack
	}, "waited %v for the streams' memory to be freed", streamsBound)
}
