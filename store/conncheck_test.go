package store

import (
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/threadline/threadline/thread/threadtest/wait"
)

// loopback returns both ends of a fresh loopback TCP connection, closed
// when the test ends.
func loopback(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestPendingConn: the peek under prepareConn says whether something waits
// on an idle connection's socket (bytes, or the end of the stream), and
// never consumes it nor waits: also not while another goroutine is blocked
// reading the same socket, as pgconn's background reader can still be on
// a connection back in the pool (a check that took the socket's read lock
// would wait for that read, forever on an idle connection).
func TestPendingConn(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the peek is Linux's (elsewhere pendingConn reports nothing)")
	}
	t.Parallel()
	t.Run("nothing", func(t *testing.T) {
		c, _ := loopback(t)
		if pending(c) {
			t.Fatal("pending on a quiet connection: got true, want false")
		}
	})
	t.Run("bytes", func(t *testing.T) {
		c, s := loopback(t)
		if _, err := s.Write([]byte("E")); err != nil {
			t.Fatal(err)
		}
		waitPending(t, c)
		buf := make([]byte, 1)
		if n, err := c.Read(buf); n != 1 || buf[0] != 'E' {
			t.Fatalf("read after the peek: got %q (%v), want the byte the peek left", buf[:n], err)
		}
	})
	t.Run("end", func(t *testing.T) {
		c, s := loopback(t)
		s.Close()
		waitPending(t, c)
	})
	t.Run("while another goroutine reads", func(t *testing.T) {
		c, s := loopback(t)
		read := make(chan struct{})
		go func() { defer close(read); _, _ = c.Read(make([]byte, 1)) }()
		waitReading(t)
		done := make(chan bool, 1)
		go func() { done <- pending(c) }()
		select {
		case got := <-done:
			if got {
				t.Fatal("pending with nothing sent: got true, want false")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("pending waited for another goroutine's read")
		}
		s.Close()
		<-read
	})
}

// waitReading waits until a goroutine of TestPendingConn is parked in a
// socket read (its stack in IO wait), for at most 10 s.
func waitReading(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	wait.Eventually(t, 10*time.Second, func() bool {
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "[IO wait") && strings.Contains(g, "TestPendingConn") {
				return true
			}
		}
		return false
	}, "the reader was not parked in its read within 10 s")
}

// waitPending waits until pending(c) says something waits (the bytes or the
// end take a moment to cross loopback), for at most 10 s.
func waitPending(t *testing.T, c net.Conn) {
	t.Helper()
	wait.Eventually(t, 10*time.Second, func() bool { return pending(c) }, "pending: got false for 10 s, want true")
}

// BenchmarkPendingConn is the check's cost on every acquire of a pooled
// connection with nothing waiting.
func BenchmarkPendingConn(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if s, err := ln.Accept(); err == nil {
			defer s.Close()
			_, _ = s.Read(make([]byte, 1))
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for b.Loop() {
		if pending(c) {
			b.Fatal("pending on a quiet connection")
		}
	}
}
