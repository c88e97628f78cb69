package api_test

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/threadline/threadline/api"
)

// fromAddr returns a client whose connections come from the loopback
// address ip (127.0.0.2, …), so one test can be several clients.
func fromAddr(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}}
}

func (e *env) get(client *http.Client, path, key string) *http.Response {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.url+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestAuthFailuresLimited: an address that keeps sending wrong keys is
// refused with 429 and Retry-After, for its right keys too, while other
// addresses go on.
func TestAuthFailuresLimited(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *options) { o.keys = map[string]string{"alice-key": "alice"} },
		withAPI(func(c *api.Config) { c.AuthFailures, c.AuthFailRate = 5, 0.01 }))
	attacker, other := fromAddr("127.0.0.2"), fromAddr("127.0.0.3")
	tried, limited := 0, 0
	for i := 0; i < 50; i++ {
		resp := e.get(attacker, "/api/v1/threads", "guess-"+string(rune('a'+i%26)))
		tried++
		switch resp.StatusCode {
		case http.StatusUnauthorized:
		case http.StatusTooManyRequests:
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
			limited++
		default:
			t.Fatalf("wrong key: got %d", resp.StatusCode)
		}
	}
	if limited != tried-5 {
		t.Fatalf("%d wrong keys with 5 allowed: %d refused with 429, want %d", tried, limited, tried-5)
	}
	if resp := e.get(attacker, "/api/v1/threads", "alice-key"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("right key from the limited address: got %d, want 429", resp.StatusCode)
	}
	if resp := e.get(other, "/api/v1/threads", "alice-key"); resp.StatusCode != http.StatusOK {
		t.Fatalf("right key from another address: got %d, want 200", resp.StatusCode)
	}
	if resp := e.get(other, "/api/v1/threads", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no key from another address: got %d, want 401", resp.StatusCode)
	}
}

// TestAddrRateLimit: requests per address are limited before
// authentication, per address.
func TestAddrRateLimit(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *options) { o.keys = map[string]string{"alice-key": "alice"} },
		withAPI(func(c *api.Config) { c.AddrRateLimit = 1 }))
	busy := fromAddr("127.0.0.4")
	limited := false
	for i := 0; i < 20 && !limited; i++ {
		resp := e.get(busy, "/api/v1/threads", "alice-key")
		limited = resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != ""
	}
	if !limited {
		t.Fatal("20 requests from one address at 1/s: no 429 with Retry-After")
	}
	if resp := e.get(fromAddr("127.0.0.5"), "/api/v1/threads", "alice-key"); resp.StatusCode != http.StatusOK {
		t.Fatalf("another address: got %d, want 200", resp.StatusCode)
	}
	// X-Forwarded-For is not trusted without configured proxies.
	req, _ := http.NewRequest("GET", e.url+"/api/v1/threads", nil)
	req.Header.Set("Authorization", "Bearer alice-key")
	req.Header.Set("X-Forwarded-For", "10.9.9.9")
	resp, err := busy.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a forged X-Forwarded-For from the limited address: got %d, want 429", resp.StatusCode)
	}
}
