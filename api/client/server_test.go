package client_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/threadline/threadline/api"
	"github.com/threadline/threadline/model"
	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
)

// options configure a test service.
type options struct {
	delay  time.Duration     // per built-in token
	tokens int               // per built-in reply
	keys   map[string]string // API keys, none: authentication off
}

// startServer starts a real service (its own cloned database, the
// built-in models and tools) and returns its base URL; it stops with tb.
func startServer(tb testing.TB, o options) string {
	tb.Helper()
	if o.tokens == 0 {
		o.tokens = 8
	}
	st := store.New(pgtest.Pool(tb))
	vars := map[string]string{
		"THREADLINE_BUILTIN_TOKENS": fmt.Sprint(o.tokens),
		"THREADLINE_BUILTIN_DELAY":  o.delay.String(),
	}
	models, err := model.NewRegistry(func(k string) string { return vars[k] })
	if err != nil {
		tb.Fatal(err)
	}
	tools := tool.NewRegistry(0)
	if err := tools.Add(tool.Builtins(nil)...); err != nil {
		tb.Fatal(err)
	}
	svc := engine.New(st, stream.New[thread.Event](256), models, st, engine.Config{Tools: tools})
	srv := api.New(svc, api.Config{APIKeys: o.keys, Attachments: st, Ready: st.Ping, Raw: st, Tools: tools})
	hs := httptest.NewServer(srv)
	svc.Start()
	tb.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		svc.Shutdown(ctx)
	})
	return hs.URL
}

// mainTB is the testing.TB of TestMain, for the service the examples use:
// it keeps the cleanups and fails the binary on Fatal.
type mainTB struct {
	testing.TB
	cleanups []func()
}

func (m *mainTB) Helper()                   {}
func (m *mainTB) Cleanup(f func())          { m.cleanups = append(m.cleanups, f) }
func (m *mainTB) Fatal(a ...any)            { panic(fmt.Sprint(a...)) }
func (m *mainTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (m *mainTB) Errorf(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }

// exampleURL is the service the examples talk to.
var exampleURL string

func TestMain(m *testing.M) {
	tb := &mainTB{}
	exampleURL = startServer(tb, options{})
	code := m.Run()
	for i := len(tb.cleanups) - 1; i >= 0; i-- {
		tb.cleanups[i]()
	}
	os.Exit(code)
}

// proxy is a loopback TCP proxy the test controls: Cut drops every
// connection open through it, Refuse(n) drops the next n at once.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	refuse int
	answer string // what a refused connection is told before it closes ("" nothing)
	opened int
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.Cut() })
	return p
}

// URL is the proxy's base URL.
func (p *proxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.opened++
		if p.refuse > 0 {
			p.refuse--
			answer := p.answer
			p.mu.Unlock()
			go refuse(c, answer)
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go pipe(c, up)
		go pipe(up, c)
	}
}

// refuse answers a connection with a canned HTTP response, if any, once
// its request arrived, and closes it.
func refuse(c net.Conn, answer string) {
	defer c.Close()
	if answer == "" {
		return
	}
	_, _ = c.Read(make([]byte, 4096))
	_, _ = io.WriteString(c, answer)
}

// httpError is a canned HTTP error response of the contract's shape.
func httpError(status int, code string) string {
	body := fmt.Sprintf(`{"error":{"code":%q,"message":"from the test proxy"}}`, code)
	return fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// Cut closes every connection open through the proxy.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Refuse makes the proxy drop the next n connections as they open.
func (p *proxy) Refuse(n int) { p.RefuseWith(n, "") }

// RefuseWith makes the proxy answer the next n connections with answer
// (an HTTP response) and close them.
func (p *proxy) RefuseWith(n int, answer string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse, p.answer = n, answer
}

// Opened returns how many connections the proxy accepted.
func (p *proxy) Opened() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.opened
}
