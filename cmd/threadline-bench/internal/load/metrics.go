package load

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/threadline/threadline/cmd/threadline-bench/internal/bench"
)

// loadScrape reads the service's Prometheus text as name{labels} -> value.
func loadScrape(ctx context.Context, hc *http.Client, tgt loadTarget) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tgt.base+"/metrics", nil)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: status %d", resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// loadHistogram turns the difference of two scrapes of the service's
// token publication histogram into bucket-bound quantiles.
func loadHistogram(before, after map[string]float64, name, tokens string) *loadServerDelay {
	qs, count, sum, ok := loadQuantiles(before, after, name, 0.5, 0.99)
	if !ok {
		return nil
	}
	d := &loadServerDelay{Metric: name, Batches: int64(count), Tokens: int64(after[tokens] - before[tokens]),
		Measures: "service side: model produced the oldest token of a log batch -> batch published to subscribers after its durable commit; one observation per batch; quantiles are bucket upper bounds"}
	if count <= 0 {
		return d
	}
	mean := bench.Round(sum/count*1000, 3)
	d.MeanMS = &mean
	d.P50LeMS, d.P99LeMS = qs[0], qs[1]
	return d
}

// loadSched is the Go scheduler's latency in the service over the load
// window: how long goroutines that were ready to run waited for a thread.
type loadSched struct {
	Metric   string   `json:"metric"`
	P50LeMS  *float64 `json:"p50_le_ms"`
	P90LeMS  *float64 `json:"p90_le_ms"`
	P99LeMS  *float64 `json:"p99_le_ms"`
	Samples  int64    `json:"samples"`
	Measures string   `json:"measures"`
}

func loadSchedLatency(before, after map[string]float64) *loadSched {
	const name = "threadline_go_sched_latency_seconds"
	qs, count, _, ok := loadQuantiles(before, after, name, 0.5, 0.9, 0.99)
	if !ok {
		return nil
	}
	return &loadSched{Metric: name, P50LeMS: qs[0], P90LeMS: qs[1], P99LeMS: qs[2], Samples: int64(count),
		Measures: "service side, from the Go runtime (/sched/latencies:seconds): time a goroutine spent ready to run before it ran; every hop of a token (log commit, publish, the stream's write) waits this once; quantiles are bucket upper bounds"}
}

// loadQuantiles returns bucket-upper-bound quantiles (in ms; nil past the
// last finite bucket), the count and the sum of a histogram between two
// scrapes; ok is false when the histogram is not there.
func loadQuantiles(before, after map[string]float64, name string, ps ...float64) (qs []*float64, count, sum float64, ok bool) {
	type bucket struct{ le, n float64 }
	var bs []bucket
	prefix := name + `_bucket{le="`
	for key, v := range after {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		le, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(key, prefix), `"}`), 64)
		if err != nil {
			continue
		}
		bs = append(bs, bucket{le, v - before[key]})
	}
	if len(bs) == 0 {
		return nil, 0, 0, false
	}
	slices.SortFunc(bs, func(a, b bucket) int {
		switch {
		case a.le < b.le:
			return -1
		case a.le > b.le:
			return 1
		}
		return 0
	})
	count = after[name+"_count"] - before[name+"_count"]
	sum = after[name+"_sum"] - before[name+"_sum"]
	qs = make([]*float64, len(ps))
	for i, p := range ps {
		for _, b := range bs {
			if count > 0 && b.n >= p*count {
				if v := b.le * 1000; !math.IsInf(v, 1) {
					v = bench.Round(v, 3)
					qs[i] = &v
				}
				break
			}
		}
	}
	return qs, count, sum, true
}
