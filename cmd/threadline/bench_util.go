package main

// Helpers shared by the benchmarks (bench peer, bench load): the machine,
// the Postgres version, the commit, and the project's own Postgres cluster.

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/threadline/threadline/store"
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

// gitCommit returns `git rev-parse HEAD` of the checkout around the binary
// or the working directory, or "unknown".
func gitCommit() string {
	if dir, err := store.RepoRoot(); err == nil {
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

// redactURL is a Postgres URL with its password hidden, for logs.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// round rounds x to digits decimal places, for readable JSON.
func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// benchProfile starts a CPU profile of this process into path (--cpuprofile),
// or nothing when path is empty; stop ends it.
func benchProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
