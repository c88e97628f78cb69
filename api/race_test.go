package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestNewThreadRace starts many first runs at once on each of several new
// thread ids: every answer is a stream or a 4xx, and every 409
// run_in_progress names a run that exists (GET answers it). The race once
// named a run whose start lost to another's and was never written.
func TestNewThreadRace(t *testing.T) {
	t.Parallel()
	e := setup(t, withTokens(40), withDelay(5*time.Millisecond))
	const threads, racers = 30, 12
	type answer struct {
		status int
		runID  string
		body   string
	}
	// Warm connections, so that the racers' requests leave together.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: racers, MaxConnsPerHost: racers}}
	var warm sync.WaitGroup
	for range racers {
		warm.Add(1)
		go func() {
			defer warm.Done()
			if resp, err := client.Get(e.url + "/healthz"); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	warm.Wait()
	tried, conflicts, streams := 0, 0, 0
	for range threads {
		tid := newID()
		answers := make([]answer, racers)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				body, _ := json.Marshal(newMessage("race", nil))
				resp, err := client.Post(e.url+"/api/v1/threads/"+tid+"/runs/stream", "application/json", bytes.NewReader(body))
				if err != nil {
					answers[i] = answer{body: err.Error()}
					return
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				a := answer{status: resp.StatusCode, body: string(b), runID: resp.Header.Get("X-Run-Id")}
				if resp.StatusCode == http.StatusConflict {
					var he struct {
						Error struct {
							Code  string `json:"code"`
							RunID string `json:"run_id"`
						} `json:"error"`
					}
					_ = json.Unmarshal(b, &he)
					if he.Error.Code != "run_in_progress" || he.Error.RunID == "" {
						a.status = -1 // reported below
					}
					a.runID = he.Error.RunID
				}
				answers[i] = a
			}()
		}
		close(gate)
		wg.Wait()
		for _, a := range answers {
			tried++
			switch a.status {
			case http.StatusOK:
				streams++
			case http.StatusConflict:
				conflicts++
				resp, b := e.do("GET", "/api/v1/threads/"+tid+"/runs/"+a.runID, nil)
				if resp.StatusCode != http.StatusOK {
					t.Errorf("thread %s: a 409 named run %s; GET it: got %d %s, want 200", tid, a.runID, resp.StatusCode, b)
				}
			case http.StatusUnprocessableEntity: // a second first message after the first run ended
			default:
				t.Errorf("thread %s: got %d %s, want 200, 409 run_in_progress naming a run, or 422", tid, a.status, a.body)
			}
		}
	}
	if conflicts == 0 {
		t.Fatalf("%d requests on %d new threads: no 409 at all; the runs did not overlap", tried, threads)
	}
	t.Logf("%d requests on %d new threads: %d × 200, %d × 409 each naming a run that exists, 5xx: 0", tried, threads, streams, conflicts)
}
