package api

import (
	"encoding/json"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/threadline/threadline/checkpoint/errcode"
)

// LimitListener caps the connections open at once at max. A connection
// over the cap is answered at once with a 503 unavailable and Retry-After
// and closed, rather than left waiting in the kernel's backlog where a
// client cannot tell a full server from a dead one. max <= 0: no cap.
func LimitListener(ln net.Listener, max int) net.Listener {
	if max <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, max: int64(max)}
}

type limitListener struct {
	net.Listener
	max  int64
	open atomic.Int64
	// refusing counts the refusals being written; Close waits for them,
	// so none outlives the listener (each is bounded by its deadline).
	refusing sync.WaitGroup
	mu       sync.Mutex // orders refusing.Add before Close's Wait
	closed   bool
}

// Close closes the listener and waits for the refusals in flight.
func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.refusing.Wait()
	return err
}

// refuseOwned answers c with the refusal on a goroutine Close waits for,
// or just closes it once the listener is closed.
func (l *limitListener) refuseOwned(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = c.Close()
		return
	}
	l.refusing.Go(func() { refuse(c) })
}

// refusal is the whole response to a connection over the cap.
var refusal = func() []byte {
	b, err := json.Marshal(errorBody{Error: errorDetail{Code: errcode.Unavailable,
		Message: "the server has too many open connections; retry shortly"}})
	if err != nil {
		panic(err) // a constant value: cannot fail
	}
	body := string(b) + "\n"
	return []byte("HTTP/1.1 " + strconv.Itoa(status(errcode.Unavailable)) + " Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: " +
		strconv.Itoa(retryAfterSeconds) + "\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			l.refuseOwned(c)
			continue
		}
		return &limitConn{Conn: c, l: l}, nil
	}
}

// refuse answers an over-cap connection without reading its request; the
// write is bounded so a client that reads nothing cannot hold it.
func refuse(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write(refusal)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_ = c.Close()
}

type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
