package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPrivateRestart: a private cluster answers, refuses connections while
// stopped or crashed, and answers again after Start and after Restart, on
// the same URL.
func TestPrivateRestart(t *testing.T) {
	t.Parallel()
	c := NewPrivate(t)
	ping := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, c.URL)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		return conn.Ping(ctx)
	}
	if err := ping(); err != nil {
		t.Fatalf("started: %v", err)
	}
	c.Stop()
	if err := ping(); err == nil {
		t.Fatal("stopped: a connection succeeded, want refused")
	}
	c.Start()
	if err := ping(); err != nil {
		t.Fatalf("started again: %v", err)
	}
	d := c.Restart()
	if err := ping(); err != nil {
		t.Fatalf("restarted: %v", err)
	}
	t.Logf("restart: down for at most %v", d)
	c.Crash()
	if err := ping(); err == nil {
		t.Fatal("crashed: a connection succeeded, want refused")
	}
	c.Start()
	if err := ping(); err != nil {
		t.Fatalf("started after a crash: %v", err)
	}
}
