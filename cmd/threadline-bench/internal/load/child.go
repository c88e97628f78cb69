package load

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// loadChild is one K's service (or floor) as a child process; it keeps the
// first problems of its log and counts its errors and warnings.
type loadChild struct {
	cmd  *exec.Cmd
	addr string
	mu   sync.Mutex
	errN int
	warn int
	prob []string
	done chan struct{}
}

func loadStartChild(ctx context.Context, o loadOpts, k int, dbURL string, interval time.Duration, stderr io.Writer) (*loadChild, error) {
	port, err := loadFreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(o.serverBin, "serve")
	if o.floor {
		cmd = exec.Command(o.serverBin, "floor")
	}
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "THREADLINE_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env,
		"THREADLINE_ADDR="+addr,
		"THREADLINE_DATABASE_URL="+dbURL,
		"THREADLINE_BUILTIN_DELAY="+interval.String(),
		"THREADLINE_BUILTIN_TOKENS="+strconv.Itoa(o.tokens),
		"THREADLINE_DEFAULT_MODEL=builtin",
		"THREADLINE_LOG_LEVEL=warn",
		"THREADLINE_DB_MAX_CONNS="+strconv.Itoa(o.dbMaxConns),
		"THREADLINE_RATE_LIMIT=0",
		// K runs of the one caller "local": the per-caller caps (a
		// fairness guard between callers) would refuse them.
		"THREADLINE_RUNS_PER_CALLER=0",
		"THREADLINE_STREAMS_PER_CALLER=0",
		"THREADLINE_ADDR_RATE_LIMIT=0",
	)
	cmd.Env = append(cmd.Env, o.serverEnv...) // the last of a key wins
	if o.cpuProfile != "" {
		cmd.Env = append(cmd.Env, "THREADLINE_CPU_PROFILE="+o.cpuProfile+".k"+strconv.Itoa(k))
	}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", strings.Join(cmd.Args, " "), err)
	}
	c := &loadChild{cmd: cmd, addr: addr, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			c.note(sc.Text())
		}
		_ = cmd.Wait()
		close(c.done)
	}()
	// Ready when /readyz answers 200.
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-c.done:
			return nil, fmt.Errorf("the service exited during start: %s", strings.Join(c.firstProblems(5), " | "))
		default:
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			c.stop(stderr)
			return nil, fmt.Errorf("the service on %s was not ready within 60s: %s", addr, strings.Join(c.firstProblems(5), " | "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *loadChild) note(line string) {
	var rec struct {
		Level string `json:"level"`
		Msg   string `json:"msg"`
		Err   string `json:"err"`
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if json.Unmarshal([]byte(line), &rec) != nil {
		rec.Level, rec.Msg = "ERROR", line // not JSON: a panic or the like
	}
	switch rec.Level {
	case "ERROR":
		c.errN++
	case "WARN":
		c.warn++
	default:
		return
	}
	if len(c.prob) < 20 {
		c.prob = append(c.prob, strings.TrimSpace(rec.Level+" "+rec.Msg+" "+rec.Err))
	}
}

func (c *loadChild) levels() (errs, warns int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errN, c.warn
}

func (c *loadChild) firstProblems(n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.prob[:min(n, len(c.prob))])
}

// stop sends SIGTERM, then SIGKILL after 20s.
func (c *loadChild) stop(stderr io.Writer) {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		fmt.Fprintln(stderr, "bench load: the service did not stop within 20s of SIGTERM; killing it")
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// defaultServerBin is the binary a child runs when --server-bin is not
// given: with floor, this executable (`threadline-bench floor`); else the
// service, threadline, beside this executable (bin/threadline next to
// bin/threadline-bench) or on $PATH.
func defaultServerBin(floor bool) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this executable: %w", err)
	}
	if floor {
		return exe, nil
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	if p := filepath.Join(filepath.Dir(exe), "threadline"); isExecutable(p) {
		return p, nil
	}
	if p, err := exec.LookPath("threadline"); err == nil {
		return p, nil
	}
	return "", errors.New("bench load: no threadline binary beside this one or on $PATH; build it (go build -o bin/threadline ./cmd/threadline) or give --server-bin")
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

func loadFreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
