// Package client is a Go client of Threadline's native API (docs/api.md):
// threads, runs and their NDJSON event streams, models, tools, limits and
// attachments.
//
// A run's events come as an iterator ([Run.Events]) that rejoins the run
// from the last sequence it read when the connection drops, so a caller
// sees every event exactly once, in order. Errors the service answers are
// [*Error] values carrying the contract's codes; errors.Is(err,
// client.ErrNotFound) and the other Err values test for a code.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/threadline/threadline/checkpoint/errcode"
)

// Client talks to one Threadline service. Its zero value is not usable;
// make one with New.
type Client struct {
	base  string
	key   string
	http  *http.Client
	retry Retry
}

// Retry bounds how a run's stream is rejoined after a dropped connection
// (and how an idempotent run start is retried): at most Attempts
// connections in a row that give no event, waiting Backoff, then twice
// that, up to MaxBackoff, between them.
type Retry struct {
	Attempts   int
	Backoff    time.Duration
	MaxBackoff time.Duration
}

// DefaultRetry is the Retry of a new Client.
var DefaultRetry = Retry{Attempts: 6, Backoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second}

// Option configures a Client.
type Option func(*Client)

// WithKey sends the API key as a bearer token.
func WithKey(key string) Option { return func(c *Client) { c.key = key } }

// WithHTTPClient uses hc for every request (default: a client without a
// timeout, as streams last as long as their runs).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithRetry replaces DefaultRetry.
func WithRetry(r Retry) Option { return func(c *Client) { c.retry = r } }

// New returns a client of the service at baseURL (scheme, host and port,
// e.g. http://127.0.0.1:8080; a trailing /api/v1 is allowed).
func New(baseURL string, opts ...Option) *Client {
	base := strings.TrimSuffix(strings.TrimRight(baseURL, "/"), "/api/v1")
	c := &Client{base: base + "/api/v1", http: &http.Client{}, retry: DefaultRetry}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Error is an error the service answered: its HTTP status and the
// contract's code and message, and for run_in_progress the running run.
type Error struct {
	Status    int
	Code      errcode.Code
	Message   string
	RunID     string // run_in_progress: the run on the thread
	MessageID string // run_in_progress: its reply
	Field     string // invalid_request: where the bad text was, if it says
	// RetryAfter is the Retry-After of a 429 or 503 (0 when absent).
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	return fmt.Sprintf("threadline: %d %s: %s", e.Status, e.Code, e.Message)
}

// Is reports whether target is the CodeError of e's code, so that
// errors.Is(err, client.ErrNotFound) holds for every not_found answer.
func (e *Error) Is(target error) bool {
	c, ok := target.(CodeError)
	return ok && errcode.Code(c) == e.Code
}

// CodeError is an error code as an error value, for errors.Is.
type CodeError errcode.Code

func (c CodeError) Error() string { return "threadline: " + string(c) }

// The codes of the contract's error table, for errors.Is.
var (
	ErrInvalid              error = CodeError(errcode.Invalid)
	ErrUnauthenticated      error = CodeError(errcode.Unauthenticated)
	ErrNotFound             error = CodeError(errcode.NotFound)
	ErrConflict             error = CodeError(errcode.Conflict)
	ErrRunInProgress        error = CodeError(errcode.RunInProgress)
	ErrTooLarge             error = CodeError(errcode.TooLarge)
	ErrUnsupportedMediaType error = CodeError(errcode.UnsupportedMediaType)
	ErrInvalidFork          error = CodeError(errcode.InvalidFork)
	ErrRateLimited          error = CodeError(errcode.RateLimited)
	ErrMethodNotAllowed     error = CodeError(errcode.MethodNotAllowed)
	ErrUnavailable          error = CodeError(errcode.Unavailable)
	ErrInternal             error = CodeError(errcode.Internal)
)

// readError turns a response that is not a success into an *Error. A body
// that is not the contract's JSON keeps the status, with code internal
// (5xx) or invalid_request, and the body's start as the message.
func readError(resp *http.Response) *Error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &Error{Status: resp.StatusCode}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	var body struct {
		Error struct {
			Code      errcode.Code `json:"code"`
			Message   string       `json:"message"`
			RunID     string       `json:"run_id"`
			MessageID string       `json:"message_id"`
			Field     string       `json:"field"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message, e.RunID, e.MessageID, e.Field = body.Error.Code, body.Error.Message, body.Error.RunID, body.Error.MessageID, body.Error.Field
		return e
	}
	e.Code = errcode.Invalid
	if resp.StatusCode >= 500 {
		e.Code = errcode.Internal
	}
	e.Message = strings.TrimSpace(string(b[:min(len(b), 200)]))
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// newRequest makes a request of path (under /api/v1) with a JSON body, if
// any.
func (c *Client) newRequest(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.authorize(req)
	return req, nil
}

func (c *Client) authorize(req *http.Request) {
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
}

// send sends req and decodes a success into out (nil: the body is
// dropped); anything else is an *Error, or the transport's error.
func (c *Client) send(req *http.Request, out any) error {
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return readError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode: %w", req.Method, req.URL.Path, err)
	}
	return nil
}

func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	req, err := c.newRequest(ctx, method, path, in)
	if err != nil {
		return err
	}
	return c.send(req, out)
}

// ThreadCreate creates a thread (id "" lets the service pick one), or
// returns the caller's existing thread of that id; another caller's id is
// not_found.
func (c *Client) ThreadCreate(ctx context.Context, id string, metadata map[string]any) (Thread, error) {
	body := map[string]any{}
	if id != "" {
		body["thread_id"] = id
	}
	if metadata != nil {
		body["metadata"] = metadata
	}
	var t Thread
	return t, c.call(ctx, http.MethodPost, "/threads", body, &t)
}

// ThreadList returns a page of the caller's threads, most recently
// updated first (limit 0: the service's default; cursor "": the first
// page). A bad limit or cursor is invalid_request.
func (c *Client) ThreadList(ctx context.Context, limit int, cursor string) (ThreadPage, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := "/threads"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var p ThreadPage
	return p, c.call(ctx, http.MethodGet, path, nil, &p)
}

// ThreadGet returns a thread; an unknown one is not_found.
func (c *Client) ThreadGet(ctx context.Context, id string) (Thread, error) {
	var t Thread
	return t, c.call(ctx, http.MethodGet, "/threads/"+url.PathEscape(id), nil, &t)
}

// ThreadRename sets a thread's title; an unknown thread is not_found, a
// title over its limit invalid_request.
func (c *Client) ThreadRename(ctx context.Context, id, title string) (Thread, error) {
	var t Thread
	return t, c.call(ctx, http.MethodPatch, "/threads/"+url.PathEscape(id), map[string]any{"title": title}, &t)
}

// ThreadDelete deletes a thread and everything in it; an unknown thread
// is not_found.
func (c *Client) ThreadDelete(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/threads/"+url.PathEscape(id), nil, nil)
}

// ThreadMessages returns a thread's snapshot; an unknown thread is
// not_found.
func (c *Client) ThreadMessages(ctx context.Context, id string) (Snapshot, error) {
	var s Snapshot
	return s, c.call(ctx, http.MethodGet, "/threads/"+url.PathEscape(id)+"/messages", nil, &s)
}

// ThreadSetHead remembers the branch the client shows (a message that is
// not a leaf resolves to its most recent leaf); an unknown message is
// not_found.
func (c *Client) ThreadSetHead(ctx context.Context, id, messageID string) error {
	return c.call(ctx, http.MethodPut, "/threads/"+url.PathEscape(id)+"/head", map[string]string{"message_id": messageID}, nil)
}

// RunGet returns a run's row; an unknown run is not_found.
func (c *Client) RunGet(ctx context.Context, threadID, runID string) (RunInfo, error) {
	var r RunInfo
	return r, c.call(ctx, http.MethodGet, runPath(threadID, runID), nil, &r)
}

// RunCancel asks the service to stop a run (a run that ended already is
// left as it is); an unknown run is not_found.
func (c *Client) RunCancel(ctx context.Context, threadID, runID string) error {
	return c.call(ctx, http.MethodPost, runPath(threadID, runID)+"/cancel", nil, nil)
}

func runPath(threadID, runID string) string {
	return "/threads/" + url.PathEscape(threadID) + "/runs/" + url.PathEscape(runID)
}

// Models lists the models a run may name.
func (c *Client) Models(ctx context.Context) ([]Model, error) {
	var out struct {
		Models []Model `json:"models"`
	}
	return out.Models, c.call(ctx, http.MethodGet, "/models", nil, &out)
}

// Tools lists the server tools a run may call.
func (c *Client) Tools(ctx context.Context) ([]Tool, error) {
	var out struct {
		Tools []Tool `json:"tools"`
	}
	return out.Tools, c.call(ctx, http.MethodGet, "/tools", nil, &out)
}

// Limits returns the limits a client can check before it sends.
func (c *Client) Limits(ctx context.Context) (Limits, error) {
	var l Limits
	return l, c.call(ctx, http.MethodGet, "/limits", nil, &l)
}

// AttachmentUpload uploads a file (contentType "" lets the service guess
// it from the name); over the limit is too_large, a type not accepted
// unsupported_media_type.
func (c *Client) AttachmentUpload(ctx context.Context, name, contentType string, r io.Reader) (Attachment, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, name))
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	var a Attachment
	pw, err := mw.CreatePart(h)
	if err != nil {
		return a, err
	}
	if _, err := io.Copy(pw, r); err != nil {
		return a, fmt.Errorf("read %s: %w", name, err)
	}
	if err := mw.Close(); err != nil {
		return a, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/attachments", &buf)
	if err != nil {
		return a, err
	}
	c.authorize(req)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return a, c.send(req, &a)
}
