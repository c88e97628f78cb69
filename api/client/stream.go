package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Run is a run's event stream. Read it with Events (or Next) from one
// goroutine; Close may be called from any.
type Run struct {
	ThreadID string
	// RunID is the run's id (the X-Run-Id of its stream; a rejoin knows
	// it).
	RunID string
	// OnRejoin, if set, is called before each rejoin with the last
	// sequence read and what ended the connection before.
	OnRejoin func(after int64, cause error)

	c       *Client
	ctx     context.Context
	mu      sync.Mutex
	body    io.ReadCloser
	r       *bufio.Reader
	last    int64
	done    bool
	rejoins int
}

// RunStart starts a run on a thread (creating the thread if its id does
// not exist yet) and returns its stream once the service accepted it. A
// refusal is an *Error (run_in_progress names the running run in RunID
// and MessageID). A request whose message has an ID is idempotent, so a
// start that fails on the network or with a 5xx is retried as Retry says;
// any other start is sent once.
func (c *Client) RunStart(ctx context.Context, threadID string, req RunRequest) (*Run, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode run request: %w", err)
	}
	path := "/threads/" + url.PathEscape(threadID) + "/runs/stream"
	open := func() (*http.Response, error) {
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		hr.Header.Set("Content-Type", "application/json")
		return c.open(hr)
	}
	attempts := 1
	if req.Message != nil && req.Message.ID != "" {
		attempts = max(c.retry.Attempts, 1)
	}
	resp, err := c.retryOpen(ctx, attempts, open)
	if err != nil {
		return nil, err
	}
	r := &Run{ThreadID: threadID, RunID: resp.Header.Get("X-Run-Id"), c: c, ctx: ctx}
	r.attach(resp.Body)
	return r, nil
}

// RunContinue continues a turn that waits (requires_action): messageID is
// the waiting assistant message, results answer client tools' calls and
// approvals approve or reject the calls that need a person, each waiting
// call exactly once. A message that does not wait is invalid_fork.
func (c *Client) RunContinue(ctx context.Context, threadID, messageID string, results []ToolResult, approvals []Approval) (*Run, error) {
	return c.RunStart(ctx, threadID, RunRequest{ParentMessageID: messageID, ToolResults: results, Approvals: approvals})
}

// RunRejoin opens a run's stream from the event after sequence after (0:
// from the first), during the run or after it; an unknown run is
// not_found. Network errors and 5xx answers are retried as Retry says.
func (c *Client) RunRejoin(ctx context.Context, threadID, runID string, after int64) (*Run, error) {
	r := &Run{ThreadID: threadID, RunID: runID, c: c, ctx: ctx, last: after}
	body, err := c.retryOpen(ctx, max(c.retry.Attempts, 1), r.openRejoin)
	if err != nil {
		return nil, err
	}
	r.attach(body.Body)
	return r, nil
}

// RunStream starts a run and iterates its events: RunStart then
// Run.Events. A refused start is the iterator's only, error, value.
func (c *Client) RunStream(ctx context.Context, threadID string, req RunRequest) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		r, err := c.RunStart(ctx, threadID, req)
		if err != nil {
			yield(Event{}, err)
			return
		}
		r.Events()(yield)
	}
}

// open sends a stream request; a status other than 200 is an *Error.
func (c *Client) open(req *http.Request) (*http.Response, error) {
	c.authorize(req)
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	return resp, nil
}

// retryOpen calls open up to attempts times while it fails on the network
// or with a 5xx, waiting between tries.
func (c *Client) retryOpen(ctx context.Context, attempts int, open func() (*http.Response, error)) (*http.Response, error) {
	var err error
	for i := range attempts {
		if i > 0 {
			if werr := c.wait(ctx, i-1, err); werr != nil {
				return nil, werr
			}
		}
		var resp *http.Response
		resp, err = open()
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !retryable(err) {
			return nil, err
		}
	}
	return nil, err
}

// retryable reports whether err may pass when the request is sent again:
// a network error or a 5xx answer.
func retryable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Status >= 500
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// wait sleeps before retry n (from 0): Backoff doubled n times, at most
// MaxBackoff, or a longer Retry-After up to MaxBackoff.
func (c *Client) wait(ctx context.Context, n int, cause error) error {
	d := c.retry.Backoff
	for range n {
		d *= 2
		if d >= c.retry.MaxBackoff {
			break
		}
	}
	var e *Error
	if errors.As(cause, &e) && e.RetryAfter > d {
		d = e.RetryAfter
	}
	d = min(d, c.retry.MaxBackoff)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Run) openRejoin() (*http.Response, error) {
	u := r.c.base + runPath(r.ThreadID, r.RunID) + "/stream?after=" + strconv.FormatInt(r.last, 10)
	req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	return r.c.open(req)
}

func (r *Run) attach(body io.ReadCloser) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		body.Close()
		return
	}
	r.body, r.r = body, bufio.NewReaderSize(body, 64<<10)
}

func (r *Run) detach() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.body != nil {
		r.body.Close()
		r.body, r.r = nil, nil
	}
}

// Close ends the stream (the run itself goes on unless it was started
// with on_disconnect "cancel"; RunCancel stops it).
func (r *Run) Close() error {
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
	r.detach()
	return nil
}

// LastSequence returns the sequence of the last event read.
func (r *Run) LastSequence() int64 { return r.last }

// Rejoins returns how many times the stream was rejoined.
func (r *Run) Rejoins() int { return r.rejoins }

// Events iterates the run's events to its final snapshot, each sequence
// exactly once and in order, rejoining after a dropped connection (see
// Next). It ends after the final snapshot, or after yielding an error.
// Breaking out of the loop closes the stream.
func (r *Run) Events() iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		defer r.Close()
		for {
			ev, err := r.Next()
			if err == io.EOF { // Next's own end; a wrapped cause is an error

				return
			}
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}

// errProtocol marks a stream that broke the contract: a line that is not
// an event, or a sequence gap. It is not retried.
var errProtocol = errors.New("threadline: stream broke the contract")

// Next returns the next event, or io.EOF itself (never wrapped) after the
// final snapshot or Close. A connection that breaks, or ends before the final
// snapshot, is rejoined with ?after= the last sequence read: up to
// Retry.Attempts connections in a row without an event, and only while
// they fail on the network or with a 5xx; then the last failure comes
// back. Events a rejoin repeats are skipped; a gap is an error.
func (r *Run) Next() (Event, error) {
	var cause error
	fails := 0
	for {
		r.mu.Lock()
		done, br := r.done, r.r
		r.mu.Unlock()
		if done {
			return Event{}, io.EOF
		}
		if br != nil {
			ev, err := r.read(br)
			if err == nil {
				if ev.Sequence <= r.last {
					continue // a repeat: the caller has it already
				}
				if ev.Sequence != r.last+1 {
					r.Close()
					return Event{}, fmt.Errorf("%w: run %s: sequence %d after %d", errProtocol, r.RunID, ev.Sequence, r.last)
				}
				r.last = ev.Sequence
				if r.RunID == "" {
					r.RunID = ev.RunID
				}
				if ev.Final() {
					r.Close()
				}
				return ev, nil
			}
			r.detach()
			if errors.Is(err, errProtocol) {
				r.Close()
				return Event{}, err
			}
			cause = err
		}
		if err := r.reconnect(&fails, cause); err != nil {
			r.Close()
			return Event{}, err
		}
	}
}

// reconnect opens a rejoin after the connection ended with cause.
func (r *Run) reconnect(fails *int, cause error) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	if r.RunID == "" {
		return fmt.Errorf("threadline: stream ended before its run id was known: %w", cause)
	}
	for {
		if *fails >= max(r.c.retry.Attempts, 1) {
			return fmt.Errorf("threadline: rejoin run %s after sequence %d: gave up after %d attempts: %w", r.RunID, r.last, *fails, cause)
		}
		if err := r.c.wait(r.ctx, *fails, cause); err != nil {
			return err
		}
		*fails++
		if r.OnRejoin != nil {
			r.OnRejoin(r.last, cause)
		}
		resp, err := r.openRejoin()
		if err == nil {
			r.rejoins++
			r.attach(resp.Body)
			return nil
		}
		if r.ctx.Err() != nil {
			return r.ctx.Err()
		}
		if !retryable(err) {
			return err
		}
		cause = err
	}
}

// read reads one event line. A connection that ends mid-line loses the
// piece (the rejoin sends the event again); a line that is not an event
// is errProtocol.
func (r *Run) read(br *bufio.Reader) (Event, error) {
	line, err := br.ReadBytes('\n')
	if err != nil {
		// A last line without its newline is whole if it parses.
		var ev Event
		if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &ev) != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // the stream ended before its final snapshot
			}
			return Event{}, err
		}
	}
	line = bytes.TrimRight(line, "\r\n")
	var ev Event
	if uerr := json.Unmarshal(line, &ev); uerr != nil || ev.Type == "" {
		return Event{}, fmt.Errorf("%w: bad line %.80q", errProtocol, line)
	}
	ev.Raw = line
	return ev, nil
}
