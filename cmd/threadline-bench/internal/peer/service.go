package peer

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/threadline/threadline/api"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/model/builtin"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
)

// benchModels is the model registry of the bench: the built-in model with
// T tokens per reply, and the long run's model.
type benchModels struct {
	reply, big *builtin.Builtin
}

func (m benchModels) Resolve(name string) (thread.Model, string, error) {
	switch name {
	case "", builtin.BuiltinName:
		return m.reply, builtin.BuiltinName, nil
	case bigModelName:
		return m.big, bigModelName, nil
	}
	return nil, "", errcode.New(errcode.Invalid, "unknown model %q", name)
}

func (m benchModels) List() []thread.ModelInfo {
	return []thread.ModelInfo{
		{Name: builtin.BuiltinName, Provider: "builtin", Model: builtin.BuiltinName, Configured: true, Default: true},
		{Name: bigModelName, Provider: "builtin", Model: builtin.BuiltinName, Configured: true},
	}
}

func (benchModels) ContextBudget(string) int { return 0 }

// open migrates the database and starts the service and two HTTP servers.
func (b *peerBench) open(ctx context.Context, dbURL string) error {
	if err := store.MigrateUp(ctx, dbURL); err != nil {
		return err
	}
	st, err := store.Open(ctx, dbURL, 16)
	if err != nil {
		return err
	}
	b.st = st
	b.timed = &timedStore{Store: st, ops: map[string]*opStat{}}
	if b.pgStats, err = pgx.Connect(ctx, dbURL); err != nil {
		return err
	}
	// The commit probe's table lives outside the public schema, so the
	// size figures (sizeSQL) do not count it.
	if _, err := b.pgStats.Exec(ctx, `CREATE SCHEMA bench_probe; CREATE TABLE bench_probe.commits (x int)`); err != nil {
		return fmt.Errorf("commit probe table: %w", err)
	}
	if err := b.settle(ctx); err != nil {
		return err
	}
	b.log = slog.New(slog.NewTextHandler(b.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b.models = benchModels{reply: builtin.NewBuiltin(peerReplyTokens, 0), big: builtin.NewBuiltin(b.opt.bigTokens, 0)}
	b.svc = b.newService()
	// Leases and the log's purge, stopped (closers) before the store
	// closes: a purge on a closed pool would log an error.
	b.svc.Start()
	b.closers = append(b.closers, b.svc.Stop)
	warm := api.New(b.svc, api.Config{Logger: b.log, Attachments: st, Ready: st.Ping})
	b.coldH.Store(b.newColdServer())
	cold := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { b.coldH.Load().ServeHTTP(w, r) })
	for _, h := range []struct {
		h    http.Handler
		base *string
	}{{warm, &b.warm}, {cold, &b.cold}} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		srv := &http.Server{Handler: h.h, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		*h.base = "http://" + ln.Addr().String()
		b.closers = append(b.closers, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		})
	}
	b.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	return nil
}

func (b *peerBench) close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
	b.closers = nil
	if b.svc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b.svc.Shutdown(ctx)
		cancel()
	}
	if b.client != nil {
		b.client.CloseIdleConnections()
	}
	if b.pgStats != nil {
		_ = b.pgStats.Close(context.Background())
	}
	if b.st != nil {
		b.st.Close()
	}
}

// newService returns a Service with an empty tree cache on the bench's store.
func (b *peerBench) newService() *engine.Service {
	return engine.New(b.timed, stream.New[thread.Event](1024), b.models, b.st, engine.Config{Logger: b.log})
}

func (b *peerBench) newColdServer() *api.Server {
	return api.New(b.newService(), api.Config{Logger: b.log, Attachments: b.st, Registry: prometheus.NewRegistry()})
}
