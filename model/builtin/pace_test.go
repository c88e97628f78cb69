package builtin

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestPacedStep checks the schedule on a synthetic clock: a step sends
// every token due by its now (a late stream catches up instead of slipping)
// and none before its time.
func TestPacedStep(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	const d = 20 * time.Millisecond
	var sent []int
	p := &paced{ctx: context.Background(), n: 10, at: t0.Add(d), every: d, done: make(chan struct{}),
		send: func(i int) error { sent = append(sent, i); return nil }}
	steps := []struct {
		now      time.Duration // after t0
		wantSent int           // tokens sent so far
		wantMore bool
	}{
		{d / 2, 0, true},     // nothing due yet
		{d, 1, true},         // token 0 exactly on time
		{3*d + d/2, 3, true}, // a late wake: tokens 1 and 2 at once
		{3*d + d/2, 3, true}, // token 3 is not due yet
		{100 * d, 10, false}, // the rest, then done
	}
	for _, st := range steps {
		more := p.step(t0.Add(st.now))
		if len(sent) != st.wantSent || more != st.wantMore {
			t.Fatalf("step at %v: got %d sent, more %v; want %d, %v", st.now, len(sent), more, st.wantSent, st.wantMore)
		}
	}
	for i, v := range sent {
		if v != i {
			t.Fatalf("order: got %v, want 0..9", sent)
		}
	}
	if got, want := p.at, t0.Add(11*d); !got.Equal(want) {
		t.Fatalf("next due: got %v, want %v (the schedule does not move when a step is late)", got, want)
	}
	select {
	case <-p.done:
	default:
		t.Fatal("done not closed after the last token")
	}
}

func TestPacedStepStops(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	boom := errors.New("client gone")
	ctx, cancel := context.WithCancel(context.Background())
	tests := []struct {
		name    string
		ctx     context.Context
		stopped bool
		failAt  int
		wantN   int
		wantErr error
	}{
		{"send fails", context.Background(), false, 2, 3, boom},
		{"ctx ended", ctx, false, -1, 0, context.Canceled},
		{"stopped by its owner", context.Background(), true, -1, 0, nil},
	}
	cancel()
	for _, tc := range tests {
		n := 0
		p := &paced{ctx: tc.ctx, n: 10, at: t0, every: time.Millisecond, stopped: tc.stopped, done: make(chan struct{}),
			send: func(i int) error {
				n++
				if i == tc.failAt {
					return boom
				}
				return nil
			}}
		if more := p.step(t0.Add(time.Hour)); more || n != tc.wantN || !errors.Is(p.err, tc.wantErr) {
			t.Fatalf("%s: got more %v, %d sends, err %v; want false, %d, %v", tc.name, more, n, p.err, tc.wantN, tc.wantErr)
		}
	}
}

// TestPaceManyStreams runs streams side by side on one pacer and on none
// (each paced inline on its own goroutine), with the race detector in
// `make test`: each gets all its tokens in order, on or after their due
// time, and a cancelled one gets none after pace returns.
func TestPaceManyStreams(t *testing.T) {
	t.Parallel()
	shared := NewPacer()
	shared.Start()
	t.Cleanup(shared.Stop)
	for _, tc := range []struct {
		name string
		pc   *Pacer
	}{{"pacer", shared}, {"inline", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			paceManyStreams(t, tc.pc)
		})
	}
}

func paceManyStreams(t *testing.T, pc *Pacer) {
	const streams, n, every = 50, 20, time.Millisecond
	var wg sync.WaitGroup
	errs := make(chan error, streams+1)
	for s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			next := 0
			err := paceWith(context.Background(), pc, n, every, func(i int) error {
				if i != next {
					return fmt.Errorf("stream %d: got token %d, want %d", s, i, next)
				}
				if due := start.Add(time.Duration(i+1) * every); time.Now().Before(due) {
					return fmt.Errorf("stream %d: token %d sent before it was due", s, i)
				}
				next++
				return nil
			})
			if err == nil && next != n {
				err = fmt.Errorf("stream %d: got %d tokens, want %d", s, next, n)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		var mu sync.Mutex
		sent, returned := 0, false
		err := paceWith(ctx, pc, 1000, every, func(i int) error {
			mu.Lock()
			defer mu.Unlock()
			if returned {
				errs <- errors.New("a token was sent after pace returned")
			}
			if sent++; sent == 3 {
				cancel()
			}
			return nil
		})
		mu.Lock()
		returned = true
		mu.Unlock()
		if !errors.Is(err, context.Canceled) || sent != 3 {
			errs <- fmt.Errorf("cancelled stream: got %v after %d tokens, want context.Canceled after 3", err, sent)
		}
		time.Sleep(5 * every) // give a stray send the chance to show
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestPacerStop: Stop ends the pacer's goroutine (its Stopped signal
// closes), ends the stream still on it with ErrPacerStopped, and refuses
// later streams until Start, after which they are paced again.
func TestPacerStop(t *testing.T) {
	t.Parallel()
	pc := NewPacer()
	first := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- pc.pace(context.Background(), 1<<20, time.Millisecond, func(i int) error {
			if i == 0 {
				close(first)
			}
			return nil
		})
	}()
	<-pc.Started()
	<-first
	pc.Stop()
	<-pc.Stopped()
	if err := <-errc; !errors.Is(err, ErrPacerStopped) {
		t.Fatalf("stream on a stopped pacer: got %v, want ErrPacerStopped", err)
	}
	if err := pc.pace(context.Background(), 1, time.Millisecond, func(int) error { return nil }); !errors.Is(err, ErrPacerStopped) {
		t.Fatalf("stream after Stop: got %v, want ErrPacerStopped", err)
	}
	pc.Start()
	<-pc.Started()
	if err := pc.pace(context.Background(), 2, time.Millisecond, func(int) error { return nil }); err != nil {
		t.Fatalf("stream after Start again: got %v, want nil", err)
	}
	pc.Stop()
	<-pc.Stopped()
}
