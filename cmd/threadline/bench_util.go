package main

// Helpers shared by the benchmarks (bench peer, bench load): the machine,
// the Postgres version, the commit, and the project's own Postgres cluster.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// MachineInfo describes the machine a benchmark ran on.
type MachineInfo struct {
	CPU      string `json:"cpu"`
	Cores    int    `json:"cores"`
	MemoryMB int64  `json:"memory_mb"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

// machineInfo reads the CPU model and memory from /proc where it exists.
func machineInfo() MachineInfo {
	m := MachineInfo{CPU: "unknown", Cores: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) >= 2 && fields[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
					m.MemoryMB = kb / 1024
				}
				break
			}
		}
		f.Close()
	}
	return m
}

// pgVersion returns the server's version string (SELECT version()).
func pgVersion(ctx context.Context, conn *pgx.Conn) string {
	var v string
	if err := conn.QueryRow(ctx, `SELECT version()`).Scan(&v); err != nil {
		return "unknown"
	}
	return v
}

// gitCommit returns `git rev-parse HEAD` of the repository around the
// binary or the working directory, or "unknown".
func gitCommit() string {
	for _, dir := range candidateRoots() {
		cmd := exec.Command("git", "-C", dir, "rev-parse", "HEAD")
		out, err := cmd.Output()
		if err == nil {
			if s := strings.TrimSpace(string(out)); len(s) == 40 {
				return s
			}
		}
	}
	return "unknown"
}

// candidateRoots lists the directories a repository root is looked for
// from: the binary's directory and the working directory.
func candidateRoots() []string {
	var out []string
	if exe, err := os.Executable(); err == nil {
		if r, err := filepath.EvalSymlinks(exe); err == nil {
			exe = r
		}
		out = append(out, filepath.Dir(exe))
	}
	if wd, err := os.Getwd(); err == nil {
		out = append(out, wd)
	}
	return out
}

// repoRoot finds the Threadline checkout (the directory holding
// deploy/pg.sh and go.mod) above the binary or the working directory.
func repoRoot() (string, error) {
	for _, start := range candidateRoots() {
		for dir := start; ; dir = filepath.Dir(dir) {
			if fileExists(filepath.Join(dir, "deploy", "pg.sh")) && fileExists(filepath.Join(dir, "go.mod")) {
				return dir, nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", errors.New("no Threadline checkout (deploy/pg.sh) above the binary or the working directory")
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// startOwnCluster runs deploy/pg.sh start (which starts the project's own
// cluster or reuses the running one) and returns the URL it prints. Its
// progress goes to stderr.
func startOwnCluster(ctx context.Context, stderr io.Writer) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "deploy", "pg.sh"), "start")
	cmd.Dir = root
	cmd.Stderr = stderr
	// A server started by the script must not keep the command waiting on
	// a pipe it inherited.
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("deploy/pg.sh start: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	u := strings.TrimSpace(lines[len(lines)-1])
	if u == "" {
		return "", errors.New("deploy/pg.sh start printed no URL")
	}
	return u, nil
}

// redactURL is a Postgres URL with its password hidden, for logs.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// withDatabase is base with its database name replaced by name.
func withDatabase(base, name string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String()
}

// round rounds x to digits decimal places, for readable JSON.
func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}
