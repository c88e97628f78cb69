package api

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiters keeps one token bucket per key (an address), forgetting keys
// idle for longer than a bucket takes to refill.
type limiters struct {
	rate  rate.Limit
	burst int
	mu    sync.Mutex
	m     map[string]*limiterEntry
	swept time.Time
}

type limiterEntry struct {
	lim  *rate.Limiter
	seen time.Time
}

func newLimiters(perSecond float64, burst int) *limiters {
	return &limiters{rate: rate.Limit(perSecond), burst: max(burst, 1), m: make(map[string]*limiterEntry)}
}

func (l *limiters) get(key string, now time.Time) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > time.Minute {
		idle := max(time.Duration(float64(l.burst)/float64(l.rate)*float64(time.Second)), time.Minute)
		for k, e := range l.m {
			if now.Sub(e.seen) > idle {
				delete(l.m, k)
			}
		}
		l.swept = now
	}
	e := l.m[key]
	if e == nil {
		e = &limiterEntry{lim: rate.NewLimiter(l.rate, l.burst)}
		l.m[key] = e
	}
	e.seen = now
	return e.lim
}

// allow takes a token of key's bucket.
func (l *limiters) allow(key string) bool {
	now := time.Now()
	return l.get(key, now).AllowN(now, 1)
}

// exhausted reports whether key's bucket is empty, without taking a token.
func (l *limiters) exhausted(key string) bool {
	now := time.Now()
	return l.get(key, now).TokensAt(now) < 1
}
