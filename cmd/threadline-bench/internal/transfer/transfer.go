// Package transfer is threadline-bench's import subcommand: the import and
// export throughput of a generated ChatGPT export (messages a second, MB a
// second) and the process's peak heap while each runs.
package transfer

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/thread/export"
)

// Result is the one JSON object the subcommand prints last.
type Result struct {
	FileBytes       int64   `json:"file_bytes"`
	Threads         int     `json:"threads"`
	Messages        int     `json:"messages"`
	ImportSeconds   float64 `json:"import_seconds"`
	ImportMsgPerSec float64 `json:"import_messages_per_second"`
	ImportMBPerSec  float64 `json:"import_mb_per_second"`
	ImportPeakHeap  uint64  `json:"import_peak_heap_bytes"`
	ExportSeconds   float64 `json:"export_seconds"`
	ExportMsgPerSec float64 `json:"export_messages_per_second"`
	ExportBytes     int64   `json:"export_json_bytes"`
	ExportPeakHeap  uint64  `json:"export_peak_heap_bytes"`
}

// Run generates a ChatGPT conversations.json of about --size bytes into a
// temporary file (deleted after), imports it for one caller into a database
// of its own (dropped after), then exports every thread as JSON.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("threadline-bench import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL0 := fs.String("database-url", getenv("THREADLINE_DATABASE_URL"), "Postgres URL of a server where a database may be created (THREADLINE_DATABASE_URL)")
	size := fs.Int64("size", 64<<20, "bytes of the generated file")
	perConv := fs.Int("messages", 40, "messages a conversation (one edit branch each)")
	textLen := fs.Int("text", 1500, "bytes of text a message")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dbURL0 == "" {
		return errors.New("set THREADLINE_DATABASE_URL (or --database-url)")
	}
	f, err := os.CreateTemp("", "threadline-bench-conversations-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	n, err := generate(f, *size, *perConv, *textLen)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "generated %s: %d bytes\n", f.Name(), n)
	dbURL, drop, err := scratchDB(ctx, *dbURL0)
	if err != nil {
		return err
	}
	defer drop()
	if err := store.MigrateUp(ctx, dbURL); err != nil {
		return err
	}
	st, err := store.Open(ctx, dbURL, 4)
	if err != nil {
		return err
	}
	defer st.Close()
	res := Result{FileBytes: n}
	if err := runImport(ctx, st, f, &res); err != nil {
		return err
	}
	if err := runExport(ctx, st, &res); err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(res)
}

func runImport(ctx context.Context, st *store.Store, f *os.File, res *Result) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	runtime.GC()
	peak := watchHeap()
	start := time.Now()
	rd, err := export.NewReader(f, export.Options{MaxMessage: 256 << 10, MaxThreadMessages: 10000, Now: time.Now().UTC()})
	if err != nil {
		return err
	}
	defer rd.Close()
	out, err := st.ThreadImport(ctx, "bench", rd.Next)
	d := time.Since(start)
	res.ImportPeakHeap = peak()
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	res.Threads = len(out)
	for _, t := range out {
		res.Messages += t.Messages
	}
	res.ImportSeconds = d.Seconds()
	res.ImportMsgPerSec = float64(res.Messages) / d.Seconds()
	res.ImportMBPerSec = float64(res.FileBytes) / (1 << 20) / d.Seconds()
	return nil
}

func runExport(ctx context.Context, st *store.Store, res *Result) error {
	refs, err := st.ThreadRefs(ctx, "bench", false)
	if err != nil {
		return err
	}
	runtime.GC()
	peak := watchHeap()
	start := time.Now()
	msgs := 0
	for _, ref := range refs {
		x, err := st.ThreadExport(ctx, ref.Caller, ref.ID)
		if err != nil {
			return err
		}
		d, err := export.Build(x, nil)
		if err != nil {
			return err
		}
		b, err := d.Encode()
		if err != nil {
			return err
		}
		res.ExportBytes += int64(len(b))
		msgs += len(x.Nodes)
	}
	dur := time.Since(start)
	res.ExportPeakHeap = peak()
	res.ExportSeconds = dur.Seconds()
	res.ExportMsgPerSec = float64(msgs) / dur.Seconds()
	return nil
}

// watchHeap samples the live heap (runtime/metrics) every 5 ms until the
// returned function is called, which returns the highest sample.
func watchHeap() func() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var mu sync.Mutex
	var peak uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	read := func() {
		metrics.Read(sample)
		v := sample[0].Value.Uint64()
		mu.Lock()
		peak = max(peak, v)
		mu.Unlock()
	}
	go func() {
		defer close(stopped)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				read()
			}
		}
	}()
	return func() uint64 {
		read()
		close(done)
		<-stopped
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// scratchDB creates a database of its own on url's server and returns its
// URL and a function that drops it. url must be a postgres:// URL.
func scratchDB(ctx context.Context, dsn string) (string, func(), error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, fmt.Errorf("the database URL must be a postgres:// URL")
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", nil, err
	}
	name := fmt.Sprintf("tl_bench_import_%d", os.Getpid())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		conn.Close(ctx)
		return "", nil, err
	}
	drop := func() {
		_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		conn.Close(context.Background())
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// generate writes ChatGPT conversations of perConv messages (a chain, with
// the first user message edited once: two branches) until about size
// bytes, streaming.
func generate(w io.Writer, size int64, perConv, textLen int) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &countWriter{w: bw}
	text := make([]byte, textLen)
	for i := range text {
		text[i] = "abcdefghij klmnopqrstuvwxyz "[i%28]
	}
	cw.WriteString("[")
	for c := 0; cw.n < size; c++ {
		if c > 0 {
			cw.WriteString(",")
		}
		writeConversation(cw, c, perConv, string(text))
	}
	cw.WriteString("]\n")
	if err := bw.Flush(); err != nil {
		return 0, err
	}
	return cw.n, cw.err
}

func writeConversation(w *countWriter, c, perConv int, text string) {
	ids := make([]string, perConv+1)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	fmt.Fprintf(w, `{"title":"Conversation %d","create_time":%d.5,"update_time":%d.5,"conversation_id":"%s","mapping":{`, c, 1732000000+c, 1732000100+c, uuid.NewString())
	fmt.Fprintf(w, `"root":{"id":"root","message":null,"parent":null,"children":["%s","%s"]}`, ids[0], ids[perConv])
	for i := 0; i < perConv; i++ {
		parent := "root"
		if i > 0 {
			parent = ids[i-1]
		}
		role, model := "user", ""
		if i%2 == 1 {
			role, model = "assistant", `,"model_slug":"gpt-4o"`
		}
		next := ""
		if i+1 < perConv {
			next = `"` + ids[i+1] + `"`
		}
		fmt.Fprintf(w, `,"%s":{"id":"%s","message":{"id":"%s","author":{"role":"%s"},"create_time":%d,"content":{"content_type":"text","parts":["%d %s"]},"status":"finished_successfully","metadata":{"is_visually_hidden_from_conversation":false%s},"recipient":"all"},"parent":"%s","children":[%s]}`,
			ids[i], ids[i], ids[i], role, 1732000000+c+i, i, text, model, parent, next)
	}
	// The edit: a second first message.
	fmt.Fprintf(w, `,"%s":{"id":"%s","message":{"id":"%s","author":{"role":"user"},"create_time":%d,"content":{"content_type":"text","parts":["edited %s"]},"status":"finished_successfully","metadata":{},"recipient":"all"},"parent":"root","children":[]}`,
		ids[perConv], ids[perConv], ids[perConv], 1732000000+c+perConv, text)
	fmt.Fprintf(w, `},"current_node":"%s"}`, ids[perConv-1])
}

type countWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

func (c *countWriter) WriteString(s string) { _, _ = c.Write([]byte(s)) }
