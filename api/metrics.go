package api

import (
	"math"
	rtmetrics "runtime/metrics"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/threadline/threadline/thread"
)

type metrics struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	streams   prometheus.Gauge
	runs      *prometheus.CounterVec
	published prometheus.Histogram
	tokens    prometheus.Counter
}

func newMetrics(reg *prometheus.Registry) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "threadline_http_requests_total",
			Help: "HTTP requests by route, method and status."}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "threadline_http_request_duration_seconds",
			Help:    "Time to the end of the response (whole stream for runs), by route and method.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}, []string{"route", "method"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "threadline_streams_open", Help: "NDJSON streams being written."}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "threadline_runs_total",
			Help: "Runs ended, by final status."}, []string{"status"}),
		published: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "threadline_token_publish_delay_seconds",
			Help:    "Delay between the model producing a token and its publication after the durable log write (oldest token of each batch).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		tokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "threadline_tokens_published_total", Help: "Token events published."}),
	}
	reg.MustRegister(m.requests, m.latency, m.streams, m.runs, m.published, m.tokens,
		collectors.NewGoCollector(), schedCollector{}, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// schedCollector exposes the Go runtime's scheduler latencies
// (/sched/latencies:seconds: how long ready goroutines waited to run) as
// threadline_go_sched_latency_seconds with fine buckets; the Go collector's
// own copy of it has buckets a decade wide. Under a load that fills the
// cores every hop of a token (commit, publish, write) waits this, so it is
// where a streaming delay goes that no span shows.
type schedCollector struct{}

var (
	schedDesc = prometheus.NewDesc("threadline_go_sched_latency_seconds",
		"Time goroutines spent ready to run before running (Go runtime /sched/latencies:seconds, sampled by the runtime).", nil, nil)
	schedBuckets = prometheus.ExponentialBuckets(0.0001, 2, 16)
)

func (schedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- schedDesc }

func (schedCollector) Collect(ch chan<- prometheus.Metric) {
	sm := []rtmetrics.Sample{{Name: "/sched/latencies:seconds"}}
	rtmetrics.Read(sm)
	if sm[0].Value.Kind() != rtmetrics.KindFloat64Histogram {
		return
	}
	h := sm[0].Value.Float64Histogram()
	counts := make(map[float64]uint64, len(schedBuckets))
	var total uint64
	var sum float64
	for i, n := range h.Counts {
		if n == 0 {
			continue
		}
		// Counts[i] lies in [Buckets[i], Buckets[i+1]): it goes to every
		// le bound at or above its upper edge, and its midpoint to the sum.
		lo, hi := h.Buckets[i], h.Buckets[i+1]
		total += n
		if !math.IsInf(hi, 1) && !math.IsInf(lo, -1) {
			sum += float64(n) * (lo + hi) / 2
		}
		for _, le := range schedBuckets {
			if hi <= le {
				counts[le] += n
			}
		}
	}
	ch <- prometheus.MustNewConstHistogram(schedDesc, total, sum, counts)
}

func (m *metrics) observePublish(oldest time.Duration, tokens int) {
	m.published.Observe(oldest.Seconds())
	m.tokens.Add(float64(tokens))
}

func (m *metrics) observeRunEnd(status thread.RunStatus) {
	m.runs.WithLabelValues(string(status)).Inc()
}

// observe logs one JSON line per request with its request id and counts it.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		status := c.Response().Status
		d := time.Since(start)
		s.metrics.requests.WithLabelValues(route, c.Request().Method, strconv.Itoa(status)).Inc()
		s.metrics.latency.WithLabelValues(route, c.Request().Method).Observe(d.Seconds())
		if route != "/metrics" && route != "/healthz" {
			s.log.Info("request", "request_id", c.Response().Header().Get(echo.HeaderXRequestID), "method", c.Request().Method,
				"route", route, "path", c.Request().URL.Path, "status", status, "duration_ms", float64(d.Microseconds())/1000,
				"caller", caller(c), "run_id", c.Response().Header().Get("X-Run-Id"))
		}
		return nil
	}
}

// PoolStats is what the DB pool collector reads.
type PoolStats interface {
	AcquiredConns() int32
	IdleConns() int32
	TotalConns() int32
	MaxConns() int32
	AcquireCount() int64
	AcquireDuration() time.Duration
}

// RegisterPoolStats exports database pool gauges read at scrape time.
func RegisterPoolStats(reg *prometheus.Registry, stat func() PoolStats) {
	g := func(name, help string, f func(PoolStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "threadline_db_pool_" + name, Help: help},
			func() float64 { return f(stat()) })
	}
	reg.MustRegister(
		g("acquired_conns", "Connections in use.", func(p PoolStats) float64 { return float64(p.AcquiredConns()) }),
		g("idle_conns", "Idle connections.", func(p PoolStats) float64 { return float64(p.IdleConns()) }),
		g("total_conns", "Open connections.", func(p PoolStats) float64 { return float64(p.TotalConns()) }),
		g("max_conns", "Pool size limit.", func(p PoolStats) float64 { return float64(p.MaxConns()) }),
		g("acquire_total", "Connections acquired since start.", func(p PoolStats) float64 { return float64(p.AcquireCount()) }),
		g("acquire_seconds_total", "Time spent waiting to acquire connections.", func(p PoolStats) float64 { return p.AcquireDuration().Seconds() }),
	)
}
