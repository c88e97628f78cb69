// Package floor is `threadline-bench floor`: the floor under `bench load`.
// It serves the same stream endpoints with the built-in model (paced as in the
// service), one goroutine per run, the same token lines and the stream
// package's fan-out, but keeps everything in memory: no database, no
// durable log, no group commit, no thread tree. A token is published the
// moment the model makes it. It is not Threadline (a crash loses
// everything); it measures what HTTP streaming alone costs on this machine
// with this load generator, so BENCHMARKS.md can say how much of `bench
// load`'s delay the service's durability adds and how much any server
// would pay here.
package floor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/cmd/threadline-bench/internal/bench"
	"github.com/threadline/threadline/model/builtin"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
)

// floorEvent is one event of a floor run: sequence 1 is the first
// snapshot, then the tokens, then the final snapshot (final set).
type floorEvent struct {
	seq   int64
	text  string
	final bool
}

type floorRun struct {
	id, msg uuid.UUID
	created time.Time
	mu      sync.Mutex
	events  []floorEvent // events[i].seq == i+1
	reply   []byte       // the reply's text so far
}

type floorServer struct {
	model *builtin.Builtin
	hub   *stream.Hub[floorEvent]
	// pairs publishes a run's tokens two at a time, the writes a token of
	// the service while it is busy (THREADLINE_TOKEN_HOLD), so the floor's
	// CPU can be read at the service's writes a token. No time bound: the
	// built-in model's steady pace brings the next token within 1/rate.
	pairs bool
	mu    sync.Mutex
	runs  map[uuid.UUID]*floorRun
	wg    sync.WaitGroup
}

// Serve serves until ctx ends or SIGINT/SIGTERM. It reads the same
// environment `bench load` gives its child service: THREADLINE_ADDR,
// THREADLINE_BUILTIN_DELAY, THREADLINE_BUILTIN_TOKENS and
// THREADLINE_CPU_PROFILE, and THREADLINE_FLOOR_PAIRS (true: tokens go
// out two at a time). It fails on arguments, a bad setting, or an
// address it cannot listen on.
func Serve(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("bench floor takes no arguments, only the environment; got %q", args[0])
	}
	addr := getenv("THREADLINE_ADDR")
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	delay, err := time.ParseDuration(or(getenv("THREADLINE_BUILTIN_DELAY"), "20ms"))
	if err != nil {
		return fmt.Errorf("THREADLINE_BUILTIN_DELAY: %w", err)
	}
	tokens, err := strconv.Atoi(or(getenv("THREADLINE_BUILTIN_TOKENS"), "200"))
	if err != nil || tokens < 1 {
		return fmt.Errorf("THREADLINE_BUILTIN_TOKENS: want a whole number >= 1, got %q", getenv("THREADLINE_BUILTIN_TOKENS"))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("bench floor: %w", err)
	}
	stopProfile, err := bench.StartProfile(getenv("THREADLINE_CPU_PROFILE"))
	if err != nil {
		return fmt.Errorf("bench floor: %w", err)
	}
	defer stopProfile()
	pairs, err := strconv.ParseBool(or(getenv("THREADLINE_FLOOR_PAIRS"), "false"))
	if err != nil {
		return fmt.Errorf("THREADLINE_FLOOR_PAIRS: want true or false, got %q", getenv("THREADLINE_FLOOR_PAIRS"))
	}
	f := &floorServer{model: builtin.NewBuiltin(tokens, delay), hub: stream.New[floorEvent](256), runs: map[uuid.UUID]*floorRun{}, pairs: pairs}
	mux := http.NewServeMux()
	// The same body as the service's: a response with a body keeps its
	// connection busy until read, which bench load's preconnect relies on.
	ok := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`+"\n")
	}
	mux.HandleFunc("GET /healthz", ok)
	mux.HandleFunc("GET /readyz", ok)
	mux.HandleFunc("POST /api/v1/threads/{thread_id}/runs/stream", f.start)
	mux.HandleFunc("GET /api/v1/threads/{thread_id}/runs/{run_id}/stream", f.rejoin)
	mux.HandleFunc("GET /api/v1/threads/{thread_id}/runs/{run_id}", f.get)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintf(stderr, `{"level":"INFO","msg":"bench floor: serving","addr":%q}`+"\n", ln.Addr().String())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	f.wg.Wait()
	return nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (f *floorServer) start(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":"bad body"}`, http.StatusBadRequest)
		return
	}
	run := &floorRun{id: uuid.New(), msg: uuid.New(), created: time.Now().UTC()}
	run.events = append(run.events, floorEvent{seq: 1})
	f.mu.Lock()
	f.runs[run.id] = run
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		f.execute(run, body.Message.Content)
	}()
	f.stream(w, r, run, 0)
}

// execute runs the model, publishing each token as it comes.
func (f *floorServer) execute(run *floorRun, prompt string) {
	req := thread.ModelRequest{Call: 1, Messages: []thread.ModelMessage{{Role: checkpoint.RoleUser,
		Parts: []thread.ModelPart{{Type: thread.PartText, Text: prompt}}}}}
	var held []floorEvent
	add := func(ev floorEvent) {
		run.mu.Lock()
		ev.seq = int64(len(run.events)) + 1
		run.events = append(run.events, ev)
		if !ev.final {
			run.reply = append(run.reply, ev.text...)
		}
		run.mu.Unlock()
		held = append(held, ev)
		if !f.pairs || len(held) == 2 || ev.final {
			f.hub.Publish(run.id, held...)
			held = nil // the subscribers hold the published batch
		}
	}
	_, _ = f.model.Stream(context.Background(), req, func(d thread.Delta) error {
		if d.Kind == thread.DeltaText {
			add(floorEvent{text: d.Text})
		}
		return nil
	})
	add(floorEvent{final: true})
	f.hub.End(run.id)
}

func (f *floorServer) find(w http.ResponseWriter, r *http.Request) *floorRun {
	id, err := uuid.Parse(r.PathValue("run_id"))
	if err == nil {
		f.mu.Lock()
		run := f.runs[id]
		f.mu.Unlock()
		if run != nil {
			return run
		}
	}
	http.Error(w, `{"error":"no such run"}`, http.StatusNotFound)
	return nil
}

func (f *floorServer) rejoin(w http.ResponseWriter, r *http.Request) {
	run := f.find(w, r)
	if run == nil {
		return
	}
	after, err := strconv.ParseInt(or(r.URL.Query().Get("after"), "0"), 10, 64)
	if err != nil || after < 0 {
		http.Error(w, `{"error":"bad after"}`, http.StatusBadRequest)
		return
	}
	f.stream(w, r, run, after)
}

func (f *floorServer) get(w http.ResponseWriter, r *http.Request) {
	run := f.find(w, r)
	if run == nil {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": run.id, "created_at": run.created})
}

// stream writes the run's events after `after`: first those already made,
// then each published batch, flushing whenever no further batch is ready.
// A subscription that lagged reads the rest from the run's memory.
func (f *floorServer) stream(w http.ResponseWriter, r *http.Request, run *floorRun, after int64) {
	sub := f.hub.Subscribe(run.id)
	defer func() { sub.Close() }()
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("X-Run-Id", run.id.String())
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var line []byte
	last := after
	// write writes evs[i] with seq > last; it reports whether the run ended.
	write := func(evs []floorEvent) (bool, error) {
		for _, ev := range evs {
			if ev.seq <= last {
				continue
			}
			last = ev.seq
			line = f.line(line[:0], run, ev)
			if _, err := w.Write(line); err != nil {
				return false, err
			}
			if ev.final {
				return true, nil
			}
		}
		return false, nil
	}
	catchUp := func() (bool, error) {
		run.mu.Lock()
		evs := run.events[min(int(last), len(run.events)):]
		run.mu.Unlock()
		return write(evs)
	}
	// take handles one receive from the subscription.
	take := func(evs []floorEvent, ok bool) (bool, error) {
		if ok {
			return write(evs)
		}
		if sub.Lagged() { // dropped for falling behind: again, from memory
			sub = f.hub.Subscribe(run.id)
		}
		// Ended: the rest, final snapshot included, is in memory.
		return catchUp()
	}
	done, err := catchUp()
	for err == nil && !done {
		if err = rc.Flush(); err != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case evs, ok := <-sub.C():
			done, err = take(evs, ok)
		}
		for more := true; more && err == nil && !done; {
			select {
			case evs, ok := <-sub.C():
				done, err = take(evs, ok)
			default:
				more = false
			}
		}
	}
	if err == nil {
		_ = rc.Flush()
	}
}

// line is ev's NDJSON line.
func (f *floorServer) line(b []byte, run *floorRun, ev floorEvent) []byte {
	if ev.seq > 1 && !ev.final {
		return appendTokenLine(b, run.id, ev.seq, run.msg, ev.text)
	}
	status, msgs := "running", "[]"
	if ev.final {
		run.mu.Lock()
		text := string(run.reply)
		run.mu.Unlock()
		m, _ := json.Marshal([]map[string]any{{"id": run.msg, "role": "assistant",
			"content": []map[string]string{{"type": "text", "text": text}}}})
		status, msgs = "succeeded", string(m)
	}
	b = append(b, `{"type":"snapshot","run_id":"`...)
	b = wire.AppendUUID(b, run.id)
	b = append(b, `","sequence":`...)
	b = strconv.AppendInt(b, ev.seq, 10)
	b = append(b, `,"run_status":"`+status+`","messageRepository":{"headId":"`...)
	b = wire.AppendUUID(b, run.msg)
	b = append(b, `","messages":[]},"messages":`+msgs+"}\n"...)
	return b
}

// appendTokenLine appends a token event's NDJSON line with the service's
// own writer (api/wire): the floor pays what the service pays per token
// line, and writes the same bytes.
func appendTokenLine(b []byte, runID uuid.UUID, seq int64, msgID uuid.UUID, text string) []byte {
	ev := thread.Event{Type: thread.KindToken, RunID: runID, Sequence: seq, MessageID: msgID, Text: text}
	return wire.AppendEventLine(b, &ev)
}
