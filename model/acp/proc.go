package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// proc is one agent process: its stdout is read line by line by the tap,
// which checks each line (JSON, under the size bound), hands it to the raw
// callback and passes it on to the SDK's connection; what the SDK writes
// goes to the process's stdin through the same callback. close kills the
// process group and reaps everything.
type proc struct {
	cmd    *exec.Cmd
	pid    int
	stdin  *os.File       // our end of the process's stdin
	stdout *os.File       // our end of the process's stdout
	toSDK  *io.PipeWriter // the tap writes checked lines here
	fromUs *io.PipeReader // the SDK reads them here
	stderr tail
	max    int

	raw   func(sent bool, line []byte) // set by the session; called by the taps
	seen  atomic.Int64                 // unix nanos of the last line from the agent
	lines atomic.Int64                 // session/update notifications read off the wire

	exited  chan struct{} // closed when Wait returned
	waitErr error
	tapDone chan struct{}

	failOnce sync.Once
	failed   chan struct{} // closed on the first failure the tap saw
	failErr  error

	closeOnce sync.Once
}

// spawn starts the agent process in its own process group.
func spawn(cfg AgentConfig, getenv func(string) string, raw func(bool, []byte)) (*proc, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Dir = cfg.Cwd
	cmd.Env = agentEnv(cfg, getenv)
	cmd.Stdin, cmd.Stdout = inR, outW
	p := &proc{cmd: cmd, stdin: inW, stdout: outR, max: cfg.MaxMessageBytes, raw: raw,
		exited: make(chan struct{}), tapDone: make(chan struct{}), failed: make(chan struct{})}
	cmd.Stderr = &p.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second // a grandchild holding stderr open does not hold Wait
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("start %s: %w", cfg.Command, err)
	}
	p.pid = cmd.Process.Pid
	p.seen.Store(time.Now().UnixNano())
	p.fromUs, p.toSDK = io.Pipe()
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	go p.tap()
	return p, nil
}

// agentEnv is the process's environment: PATH, HOME, LANG and TMPDIR of
// the service, then the agent's env with ${VAR} expanded from getenv.
func agentEnv(cfg AgentConfig, getenv func(string) string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG", "TMPDIR"} {
		if v := getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range cfg.Env {
		env = append(env, k+"="+os.Expand(v, getenv))
	}
	return env
}

// fail records the first failure and ends the SDK's input with it.
func (p *proc) fail(err error) {
	p.failOnce.Do(func() {
		p.failErr = err
		close(p.failed)
	})
	p.toSDK.CloseWithError(err)
}

// tap reads the agent's stdout line by line until it ends or fails.
func (p *proc) tap() {
	defer close(p.tapDone)
	sc := bufio.NewScanner(p.stdout)
	sc.Buffer(make([]byte, 0, 64<<10), p.max)
	for sc.Scan() {
		line := sc.Bytes()
		p.seen.Store(time.Now().UnixNano())
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		p.raw(false, line)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if line[0] != '{' || json.Unmarshal(line, &m) != nil {
			p.fail(fmt.Errorf("the agent wrote a line that is not JSON-RPC: %q", clip(line, 120)))
			return
		}
		if m.ID == nil && m.Method == "session/update" {
			p.lines.Add(1)
		}
		msg := make([]byte, len(line)+1)
		copy(msg, line)
		msg[len(line)] = '\n'
		if _, err := p.toSDK.Write(msg); err != nil {
			return
		}
	}
	switch err := sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		p.fail(fmt.Errorf("the agent sent a message over %d bytes (max_message_bytes)", p.max))
	case err != nil && !errors.Is(err, os.ErrClosed):
		p.fail(fmt.Errorf("read the agent's output: %w", err))
	default:
		p.fail(errors.New("the agent closed its output"))
	}
}

// Write is what the SDK writes to the agent: each line goes to the raw
// callback, then to the process's stdin.
func (p *proc) Write(b []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n")) {
		if len(line) > 0 {
			p.raw(true, line)
		}
	}
	return p.stdin.Write(b)
}

// reason explains why the process stopped serving: the tap's failure, or
// its exit with the last of its stderr.
func (p *proc) reason() string {
	select {
	case <-p.exited:
		msg := "the agent process exited"
		if p.waitErr != nil {
			msg += " (" + p.waitErr.Error() + ")"
		}
		if t := p.stderr.last(); t != "" {
			msg += ": " + t
		}
		return msg
	default:
	}
	select {
	case <-p.failed:
		if p.failErr.Error() == "the agent closed its output" {
			// Give the exit a moment: its status says more than EOF.
			select {
			case <-p.exited:
				return p.reason()
			case <-time.After(500 * time.Millisecond):
			}
		}
		return p.failErr.Error()
	default:
	}
	return "the agent stopped answering"
}

// close kills the process group and waits for the process, the tap and
// their pipes to be done. It is safe to call more than once.
func (p *proc) close() {
	p.closeOnce.Do(func() {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		p.stdin.Close()
		<-p.exited
		p.stdout.Close()
		<-p.tapDone
		p.toSDK.CloseWithError(errors.New("the agent process was stopped"))
		p.fromUs.Close()
	})
}

// tail keeps the last bytes an agent wrote to stderr.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailBytes = 2048

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > tailBytes {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(b), nil
}

// last is the last non-empty line written, clipped.
func (t *tail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	return clip([]byte(strings.TrimSpace(lines[len(lines)-1])), 300)
}

func clip(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
