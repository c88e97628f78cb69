package load

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/threadline/threadline/cmd/threadline-bench/internal/bench"
)

// clock ticks per second of /proc/<pid>/stat; 100 on every Linux
// configuration Go supports.
const loadClkTck = 100

func loadProcCPU(pid int) (float64, bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name may hold spaces; fields follow the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseFloat(f[11], 64) // field 14
	st, err2 := strconv.ParseFloat(f[12], 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return (ut + st) / loadClkTck, true
}

// loadProcWrites returns the write system calls the process made so far
// (syscw of /proc/<pid>/io).
func loadProcWrites(pid int) (int64, bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

func loadProcRSS(pid int) (peakMB, endMB float64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, false
	}
	var n int
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmHWM:":
			peakMB, n = bench.Round(kb/1024, 1), n+1
		case "VmRSS:":
			endMB, n = bench.Round(kb/1024, 1), n+1
		}
	}
	return peakMB, endMB, n == 2
}

func loadSelfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

type loadCPUStat struct{ busy, total float64 }

func loadMachineCPU() (loadCPUStat, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return loadCPUStat{}, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return loadCPUStat{}, false
	}
	var s loadCPUStat
	for i, v := range f[1:] {
		if i >= 8 { // guest time is inside user already
			break
		}
		x, _ := strconv.ParseFloat(v, 64)
		s.total += x
		if i != 3 && i != 4 { // idle, iowait
			s.busy += x
		}
	}
	return s, true
}

// busyCores is how many cores were busy on average between before and s.
func (s loadCPUStat) busyCores(before loadCPUStat) float64 {
	dt := s.total - before.total
	if dt <= 0 {
		return 0
	}
	return (s.busy - before.busy) / dt * float64(runtime.NumCPU())
}

// loadRaiseNofile lifts the soft open-file limit to the hard one, for the
// client's connections (and, inherited, the child service's).
func loadRaiseNofile(stderr io.Writer) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return
	}
	if r.Cur < r.Max {
		r.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
			fmt.Fprintf(stderr, "bench load: raise the open-file limit: %v\n", err)
		}
	}
	if r.Cur < 4096 {
		fmt.Fprintf(stderr, "bench load: the open-file limit is %d; large K may run out of descriptors\n", r.Cur)
	}
}
