package main

import (
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/threadline/threadline/api/client"
	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

// screen is a process in a pseudo-terminal and everything it wrote.
type screen struct {
	t    *testing.T
	cmd  *exec.Cmd
	tty  *os.File
	mu   sync.Mutex
	buf  strings.Builder
	mark int // expect looks after this offset
	done chan error
}

func startChat(t *testing.T, args ...string) *screen {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"chat"}, args...)...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "THREADLINE_API_KEY=")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	s := &screen{t: t, cmd: cmd, tty: tty, done: make(chan error, 1)}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := tty.Read(b)
			s.mu.Lock()
			s.buf.WriteString(strings.ReplaceAll(string(b[:n]), "\r", ""))
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		tty.Close()
		if t.Failed() || testing.Verbose() {
			t.Logf("screen:\n%s", s.text())
		}
	})
	return s
}

func (s *screen) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// expect waits until the screen shows want after the last expectation,
// and returns what came between.
func (s *screen) expect(want string) string {
	s.t.Helper()
	var between string
	wait.Eventually(s.t, 30*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		out := s.buf.String()[s.mark:]
		i := strings.Index(out, want)
		if i < 0 {
			return false
		}
		s.mark += i + len(want)
		between = out[:i]
		return true
	}, "the screen did not show %q after:\n%s", want, func() any { return s.text()[s.mark:] })
	return between
}

// send types a line.
func (s *screen) send(line string) {
	s.t.Helper()
	if _, err := s.tty.WriteString(line + "\n"); err != nil {
		s.t.Fatal(err)
	}
}

// cutProxy is a loopback TCP proxy whose connections the test cuts.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close(); c.Close() }()
			go func() { _, _ = io.Copy(c, up); up.Close(); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestChatInTerminal drives `threadline chat` in a pseudo-terminal against
// a real service (the demo model, clock calls needing approval) through
// a proxy that drops its connections once: a reply with a tool call
// streams, /regen makes a second branch, /prev and /next switch it,
// /list lists the thread, /edit forks the question, an approval and an
// ask_user question are answered inline, a reply whose connection drops
// still completes, Ctrl-C cancels a reply, /new and /open leave and
// reopen the thread, and Ctrl-D exits.
func TestChatInTerminal(t *testing.T) {
	t.Parallel()
	srv := startServer(t, pgtest.New(t), "THREADLINE_BUILTIN_MODE=demo", "THREADLINE_BUILTIN_DELAY=30ms", "THREADLINE_TOOL_APPROVAL=clock")
	p := newCutProxy(t, srv.addr)
	sc := startChat(t, "--url", "http://"+p.ln.Addr().String())
	sc.expect("you> ")

	sc.send("what is 12*7?")
	sc.expect("assistant> I'll work out `12*7` with the calculator.")
	sc.expect(`⚙ calculator {"expression":"12*7"} → 84`)
	sc.expect("**12*7 = 84**")
	sc.expect("you> ")

	sc.send("/regen")
	sc.expect("84")
	sc.expect("(branch 2/2)")
	sc.expect("you> ")
	sc.send("/prev")
	sc.expect("you> what is 12*7?\n[1/2] assistant> I'll work out")
	sc.expect("you> ")
	sc.send("/next")
	sc.expect("[2/2] assistant> ")
	sc.expect("you> ")
	sc.send("\x1b[1;3D") // Alt-Left, then Enter
	sc.expect("[1/2] assistant> ")
	sc.expect("you> ")
	sc.send("\x1b[1;3C") // Alt-Right
	sc.expect("[2/2] assistant> ")
	sc.expect("you> ")

	sc.send("/list")
	if got := sc.expect("you> "); !strings.Contains(got, "* 1. ") {
		t.Fatalf("/list: got %q, want the open thread as 1, marked", got)
	}

	sc.send("/edit what is 6*7?")
	sc.expect("**6*7 = 42**")
	sc.expect("you> ")

	sc.send("what time is it?")
	sc.expect("approve clock {}? [y/n] ")
	sc.send("y")
	sc.expect(`⚙ clock {} → {"time":`) // the approved call runs in the continuation
	sc.expect("(UTC)")
	sc.expect("you> ")

	sc.send("ask me what to do")
	sc.expect("? Which should I do first? (Make a plan / Do the sums)\nanswer> ")
	sc.send("Do the sums")
	sc.expect("You answered: **Do the sums**")
	sc.expect("you> ")

	// Reasoning streams (dimmed but for NO_COLOR), a plan's data parts
	// show its progress.
	sc.send("make a plan")
	sc.expect("assistant> The request asks for a plan.")
	sc.expect("[plan] Plan: 0/4 done")
	sc.expect("[plan] Plan: 4/4 done")
	sc.expect("you> ")

	// A dropped connection mid-reply: the client rejoins and the reply
	// reads whole, once.
	sc.send("hello there")
	sc.expect("assistant> ")
	sc.expect("a small demo")
	p.cut()
	reply := sc.expect("(reconnected 1×)")
	sc.expect("you> ")
	c := client.New("http://" + srv.addr)
	page, err := c.ThreadList(t.Context(), 1, "")
	if err != nil || len(page.Threads) != 1 {
		t.Fatalf("threads: got %+v, %v", page, err)
	}
	snap, err := c.ThreadMessages(t.Context(), page.Threads[0].ThreadID)
	if err != nil {
		t.Fatal(err)
	}
	want := snap.Messages[len(snap.Messages)-1].Text()
	if got := "a small demo" + reply; strings.TrimSpace(got) != strings.TrimSpace(want[strings.Index(want, "a small demo"):]) {
		t.Fatalf("reply after the drop: screen shows %q, want the stored reply %q", got, want)
	}

	// Ctrl-C cancels the reply in progress.
	sc.send("hello again, tell me everything")
	sc.expect("assistant> ")
	sc.expect("a small demo")
	if _, err := sc.tty.Write([]byte{3}); err != nil {
		t.Fatal(err)
	}
	sc.expect("cancelled)")
	sc.expect("you> ")

	// /new leaves the thread; /open 1 shows it again on the branch
	// last shown, the edited first message as branch 2 of 2.
	sc.send("/new")
	sc.expect("(new thread)")
	sc.send("/list")
	sc.expect("  1. ")
	sc.expect("you> ")
	sc.send("/open 1")
	sc.expect("[2/2] you> what is 6*7?\n")
	sc.expect("[plan] Plan: 4/4 done")
	sc.expect("you> hello again, tell me everything\nassistant> ")
	sc.expect("(cancelled)\nyou> ")
	sc.send("/help")
	sc.expect("/prev, /next")
	sc.expect("you> ")

	// Ctrl-D exits.
	if _, err := sc.tty.Write([]byte{4}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-sc.done:
		if err != nil {
			t.Fatalf("chat exited with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("chat did not exit on Ctrl-D")
	}
}
