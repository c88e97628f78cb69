package load

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/threadline/threadline/cmd/threadline-bench/internal/bench"
)

// loadBefore is what the service, its database, the machine and this
// process had used when the load began.
type loadBefore struct {
	metrics  map[string]float64 // nil when /metrics did not answer
	db       int64
	dbErr    error
	backends map[int]float64
	cpu      float64
	cpuOK    bool
	writes   int64
	writesOK bool
	mach     loadCPUStat
	machOK   bool
	client   float64
}

func loadMeasureBefore(ctx context.Context, hc *http.Client, tgt loadTarget) loadBefore {
	var b loadBefore
	b.metrics, _ = loadScrape(ctx, hc, tgt)
	b.db, b.dbErr = loadDBSize(ctx, tgt.dbURL)
	b.backends = loadBackendCPU(ctx, tgt.dbURL)
	b.cpu, b.cpuOK = loadProcCPU(tgt.pid)
	b.writes, b.writesOK = loadProcWrites(tgt.pid)
	b.mach, b.machOK = loadMachineCPU()
	b.client = loadSelfCPU()
	return b
}

// after sets res's figures over the load window, which lasted wall: the
// process figures first, before anything else loads the server.
func (b loadBefore) after(ctx context.Context, hc *http.Client, tgt loadTarget, wall time.Duration, k int, res *Result) {
	res.ClientCPUS = bench.Round(loadSelfCPU()-b.client, 3)
	if b.machOK {
		if after, ok := loadMachineCPU(); ok {
			u := bench.Round(after.busyCores(b.mach), 3)
			res.MachineCPUUtil = &u
		}
	}
	if b.cpuOK {
		if after, ok := loadProcCPU(tgt.pid); ok {
			s := bench.Round(after-b.cpu, 3)
			u := bench.Round(s/wall.Seconds(), 3)
			res.ServerCPUS, res.ServerCPUUtil = &s, &u
		}
		if after, ok := loadProcWrites(tgt.pid); ok && b.writesOK {
			n := after - b.writes
			res.ServerWrites = &n
		}
		if peak, end, ok := loadProcRSS(tgt.pid); ok {
			res.ServerRSSPeakMB, res.ServerRSSEndMB = &peak, &end
		}
		res.ServerStats = fmt.Sprintf("/proc/%d (utime+stime over the load window; VmHWM since the process started; VmRSS at the end)", tgt.pid)
	}
	if b.backends != nil {
		if after := loadBackendCPU(ctx, tgt.dbURL); after != nil {
			var s float64
			for pid, v := range after {
				s += v - b.backends[pid] // new backends count from 0
			}
			s = bench.Round(s, 3)
			res.DBBackendCPUS = &s
		}
	}
	if after, err := loadScrape(ctx, hc, tgt); err == nil && b.metrics != nil {
		b.afterMetrics(after, wall, res)
	}
	if res.ServerStats == "" {
		res.ServerStats = "unknown (give --server-pid)"
	}
	if b.dbErr == nil {
		if after, err := loadDBSize(ctx, tgt.dbURL); err == nil {
			g := after - b.db
			per := bench.Round(float64(g)/float64(k), 1)
			res.DBGrowthBytes, res.DBGrowthPerRun = &g, &per
		}
	}
}

// afterMetrics sets the figures the service's /metrics give over the
// window: publication delay, scheduler latency, the database pool, and its
// CPU and memory when /proc could not be read.
func (b loadBefore) afterMetrics(after map[string]float64, wall time.Duration, res *Result) {
	before := b.metrics
	res.ServerDelay = loadHistogram(before, after, "threadline_token_publish_delay_seconds", "threadline_tokens_published_total")
	res.ServerSched = loadSchedLatency(before, after)
	if m, ok := after["threadline_db_pool_max_conns"]; ok {
		p := &loadPool{MaxConns: m, ConnsFrom: before["threadline_db_pool_total_conns"], ConnsTo: after["threadline_db_pool_total_conns"],
			Acquires: after["threadline_db_pool_acquire_total"] - before["threadline_db_pool_acquire_total"],
			WaitS:    bench.Round(after["threadline_db_pool_acquire_seconds_total"]-before["threadline_db_pool_acquire_seconds_total"], 3)}
		if p.Acquires > 0 {
			p.MeanWaitM = bench.Round(p.WaitS/p.Acquires*1000, 3)
		}
		res.ServerPool = p
	}
	if b.cpuOK {
		return
	}
	if a, ok := after["process_cpu_seconds_total"]; ok {
		s := bench.Round(a-before["process_cpu_seconds_total"], 3)
		u := bench.Round(s/wall.Seconds(), 3)
		res.ServerCPUS, res.ServerCPUUtil = &s, &u
		if rss, ok := after["process_resident_memory_bytes"]; ok {
			e := bench.Round(rss/(1<<20), 1)
			res.ServerRSSEndMB = &e
		}
		res.ServerStats = "/metrics process_cpu_seconds_total and process_resident_memory_bytes (no --server-pid: peak RSS unknown)"
	}
}
