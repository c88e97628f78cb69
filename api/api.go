// Package api owns HTTP: the echo routes of the wire contract, request
// decoding and limits, callers and their API keys, the one table that maps
// domain error codes to statuses, NDJSON streaming, health and metrics.
package api

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
)

// DefaultAttachmentTypes are the content types accepted for upload unless
// Config.AttachmentTypes says otherwise.
var DefaultAttachmentTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp", "text/plain", "text/markdown", "text/csv", "application/pdf", "application/json"}

// Config tunes the HTTP layer. Zero values take the defaults in parentheses.
type Config struct {
	// APIKeys maps bearer keys to caller ids; empty turns authentication off
	// and every request is the caller "local".
	APIKeys map[string]string
	// MaxBody limits JSON request bodies (1 MiB).
	MaxBody int64
	// MaxMessage limits one message's text (256 KiB).
	MaxMessage int
	// RateLimit is requests per second per caller (0: off), with a burst of
	// twice that.
	RateLimit float64
	// AddrRateLimit is requests per second per client address, before
	// authentication (0: off), with a burst of twice that.
	AddrRateLimit float64
	// AuthFailures is how many failed authentications an address may make
	// in a burst (10; negative: no limit); they are then allowed at
	// AuthFailRate per second (0.2). Over it, every request of that
	// address is refused with 429 until the bucket refills, so guessing
	// keys is slow.
	AuthFailures int
	AuthFailRate float64
	// TrustedProxies are the CIDRs of proxies whose X-Forwarded-For names
	// the client's address; without them the address is the connection's
	// own, which a client cannot forge.
	TrustedProxies []*net.IPNet
	// Logger receives one JSON line per request (slog.Default).
	Logger *slog.Logger
	// Registry collects metrics (a new registry).
	Registry *prometheus.Registry
	// Ready reports whether dependencies answer, for /readyz.
	Ready func(context.Context) error
	// Attachments, when set, serves /attachments.
	Attachments AttachmentStore
	// MaxAttachment limits one upload (10 MiB); AttachmentTypes lists the
	// accepted content types (images, text, PDF and JSON).
	MaxAttachment   int64
	AttachmentTypes []string
	// StallTimeout ends a stream whose writes cannot go out for this long
	// (30s; negative: never), so a reader that stopped reading holds
	// nothing for longer; it rejoins from the last sequence it read.
	StallTimeout time.Duration
	// MaxAttachments is how many attachments one message may name (10).
	MaxAttachments int
	// MaxPage is the largest page of GET /threads (100, the most).
	MaxPage int
	// StreamsPerCaller is how many NDJSON streams (runs and rejoins) one
	// caller may have open at once (256); RejoinsPerRun is how many
	// rejoined streams one run may have (64). Over either: 429. Negative:
	// off.
	StreamsPerCaller int
	RejoinsPerRun    int
	// Tools, when set, is what GET /api/v1/tools lists (no tools when nil).
	Tools ToolLister
	// StreamsPerProcess is how many NDJSON streams this process may have
	// open at once, of all callers (4,096); over it: 503 unavailable with
	// Retry-After. Negative: off.
	StreamsPerProcess int
	// Raw, when set, serves GET …/runs/{run_id}/raw.
	Raw RawStore
	// Trace, when set, serves GET …/runs/{run_id}/trace.
	Trace TraceStore
	// Transfer, when set, serves a thread's export and the import of
	// files of threads. MaxImport limits an import's body
	// (DefaultMaxImport); MaxThreadMessages the messages of one imported
	// thread (10,000; negative: off).
	Transfer          thread.TransferStore
	MaxImport         int64
	MaxThreadMessages int
	// Shares, when set, serves share links (/shares and
	// /threads/{thread_id}/shares).
	Shares ShareStore
	// Search, when set, serves GET /api/v1/search.
	Search SearchStore
}

// Server is the HTTP API.
type Server struct {
	echo    *echo.Echo
	svc     *engine.Service
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	streams *streamCounts
	// addrs limits requests per address; authFails limits failed
	// authentications per address. Each nil when off.
	addrs, authFails *limiters
}

// statuses maps every error code to its HTTP status: the one place that
// does. A model failure normally reaches the client as a stream event; if
// one ever ends a request instead, it is the upstream's fault (502, 504),
// or the server's configuration (503).
var statuses = map[errcode.Code]int{
	errcode.Invalid:              http.StatusBadRequest,
	errcode.Unauthenticated:      http.StatusUnauthorized,
	errcode.NotFound:             http.StatusNotFound,
	errcode.Conflict:             http.StatusConflict,
	errcode.RunInProgress:        http.StatusConflict,
	errcode.TooLarge:             http.StatusRequestEntityTooLarge,
	errcode.UnsupportedMediaType: http.StatusUnsupportedMediaType,
	errcode.InvalidFork:          http.StatusUnprocessableEntity,
	errcode.RateLimited:          http.StatusTooManyRequests,
	errcode.MethodNotAllowed:     http.StatusMethodNotAllowed,
	errcode.Unavailable:          http.StatusServiceUnavailable,
	errcode.Internal:             http.StatusInternalServerError,
	errcode.ModelNotConfigured:   http.StatusServiceUnavailable,
	errcode.ModelAuth:            http.StatusBadGateway,
	errcode.ModelTimeout:         http.StatusGatewayTimeout,
	errcode.ModelError:           http.StatusBadGateway,
	errcode.RunInterrupted:       http.StatusServiceUnavailable, // a stream event only
}

// status returns the HTTP status of code; a code missing from the table
// is a 500 (TestStatusesCoverEveryCode keeps the table whole).
func status(code errcode.Code) int {
	if st, ok := statuses[code]; ok {
		return st
	}
	return http.StatusInternalServerError
}

// retryAfterSeconds is the Retry-After of every 503 and 429.
const retryAfterSeconds = 1

// New builds the server and its routes.
func New(svc *engine.Service, cfg Config) *Server {
	cfg.defaults()
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	s := &Server{echo: e, svc: svc, cfg: cfg, log: cfg.Logger, metrics: newMetrics(cfg.Registry), streams: newStreamCounts()}
	e.HTTPErrorHandler = s.handleError
	e.Use(middleware.RequestIDWithConfig(middleware.RequestIDConfig{TargetHeader: echo.HeaderXRequestID}))
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{DisableStackAll: true}))
	e.Use(s.observe)
	e.Use(secureHeaders)

	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", s.ready)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{})))
	e.GET("/api/v1/openapi.json", serveOpenAPI)

	// Authentication and rate limiting are route middleware, not group
	// middleware: echo answers a group's unknown method with its catch-all
	// 404, and a wrong method on a known path must stay a 405.
	e.IPExtractor = echo.ExtractIPDirect()
	if len(cfg.TrustedProxies) > 0 {
		opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
		for _, n := range cfg.TrustedProxies {
			opts = append(opts, echo.TrustIPRange(n))
		}
		e.IPExtractor = echo.ExtractIPFromXFFHeader(opts...)
	}
	if cfg.AddrRateLimit > 0 {
		s.addrs = newLimiters(cfg.AddrRateLimit, int(2*cfg.AddrRateLimit)+1)
	}
	if cfg.AuthFailures > 0 {
		s.authFails = newLimiters(cfg.AuthFailRate, cfg.AuthFailures)
	}
	s.routes(e.Group("/api/v1"), s.middleware())
	return s
}

// The settings' defaults, spelled once: Config.defaults fills them in and
// cmd/threadline shows them as its flags' defaults.
const (
	DefaultMaxBody           = 1 << 20
	DefaultMaxMessage        = 256 << 10
	DefaultMaxAttachment     = 10 << 20
	DefaultMaxAttachments    = 10
	DefaultMaxPage           = 100 // also the most a page may hold
	DefaultStreamsPerCaller  = 256
	DefaultStreamsPerProcess = 4096
	DefaultRejoinsPerRun     = 64
	DefaultStallTimeout      = 30 * time.Second
)

// defaults fills the settings left zero.
func (cfg *Config) defaults() {
	setDefault(&cfg.MaxBody, DefaultMaxBody)
	setDefault(&cfg.MaxMessage, DefaultMaxMessage)
	setDefault(&cfg.MaxAttachment, DefaultMaxAttachment)
	if len(cfg.AttachmentTypes) == 0 {
		cfg.AttachmentTypes = DefaultAttachmentTypes
	}
	cfg.transferDefaults()
	setDefault(&cfg.MaxAttachments, DefaultMaxAttachments)
	if cfg.MaxPage <= 0 || cfg.MaxPage > DefaultMaxPage {
		cfg.MaxPage = DefaultMaxPage
	}
	if cfg.StreamsPerCaller == 0 {
		cfg.StreamsPerCaller = DefaultStreamsPerCaller
	}
	if cfg.StreamsPerProcess == 0 {
		cfg.StreamsPerProcess = DefaultStreamsPerProcess
	}
	if cfg.RejoinsPerRun == 0 {
		cfg.RejoinsPerRun = DefaultRejoinsPerRun
	}
	if cfg.StallTimeout == 0 {
		cfg.StallTimeout = DefaultStallTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.AuthFailures == 0 {
		cfg.AuthFailures = 10
	}
	if cfg.AuthFailRate <= 0 {
		cfg.AuthFailRate = 0.2
	}
}

// setDefault sets *v to def when it is zero or negative.
func setDefault[T int | int64](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// middleware is every authenticated route's: the per-address limit, the
// caller's key, and the per-caller rate when one is set.
func (s *Server) middleware() []echo.MiddlewareFunc {
	mw := []echo.MiddlewareFunc{s.limitAddr, s.authenticate}
	if s.cfg.RateLimit > 0 {
		mw = append(mw, middleware.RateLimiterWithConfig(middleware.RateLimiterConfig{
			Store: middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{
				Rate: rate.Limit(s.cfg.RateLimit), Burst: int(2*s.cfg.RateLimit) + 1, ExpiresIn: 3 * time.Minute}),
			IdentifierExtractor: func(c echo.Context) (string, error) { return caller(c), nil },
			DenyHandler: func(c echo.Context, _ string, _ error) error {
				return errcode.New(errcode.RateLimited, "too many requests for this caller; retry in a second")
			},
		}))
	}
	return mw
}

// routes adds the /api/v1 routes, each with mw; a route whose store is
// not configured is left out.
func (s *Server) routes(v1 *echo.Group, mw []echo.MiddlewareFunc) {
	v1.POST("/threads", s.createThread, mw...)
	v1.GET("/threads", s.listThreads, mw...)
	v1.GET("/threads/:thread_id", s.getThread, mw...)
	v1.PATCH("/threads/:thread_id", s.patchThread, mw...)
	v1.DELETE("/threads/:thread_id", s.deleteThread, mw...)
	v1.GET("/threads/:thread_id/messages", s.getMessages, mw...)
	v1.PUT("/threads/:thread_id/head", s.putHead, mw...)
	v1.GET("/threads/:thread_id/checkpoints", s.getCheckpoints, mw...)
	v1.POST("/threads/:thread_id/runs/stream", s.startRun, mw...)
	v1.GET("/threads/:thread_id/runs/:run_id/stream", s.rejoinRun, mw...)
	v1.POST("/threads/:thread_id/runs/:run_id/cancel", s.cancelRun, mw...)
	v1.GET("/threads/:thread_id/runs/:run_id", s.getRun, mw...)
	if s.cfg.Raw != nil {
		v1.GET("/threads/:thread_id/runs/:run_id/raw", s.getRunRaw, mw...)
	}
	if s.cfg.Trace != nil {
		v1.GET("/threads/:thread_id/runs/:run_id/trace", s.getRunTrace, mw...)
	}
	s.transferRoutes(v1, mw)
	v1.GET("/models", s.listModels, mw...)
	v1.POST("/ui/chat", s.uiChat, mw...)
	v1.GET("/ui/chat/:id/stream", s.uiChatStream, mw...)
	v1.GET("/tools", s.listTools, mw...)
	v1.GET("/limits", s.getLimits, mw...)
	if s.cfg.Search != nil {
		v1.GET("/search", s.search, mw...)
	}
	if s.cfg.Attachments != nil {
		v1.POST("/attachments", s.uploadAttachment, mw...)
		v1.GET("/attachments/:id", s.getAttachment, mw...)
	}
	if s.cfg.Shares != nil {
		s.shareRoutes(v1, mw)
	}
}

// shareRoutes adds the share links' routes. Reading a share and its
// attachments takes no credentials (the random share id is the secret),
// so those two routes are limited per address only.
func (s *Server) shareRoutes(v1 *echo.Group, mw []echo.MiddlewareFunc) {
	v1.POST("/threads/:thread_id/share", s.createShare, mw...)
	v1.POST("/threads/:thread_id/fork", s.forkThread, mw...)
	v1.GET("/threads/:thread_id/shares", s.listShares, mw...)
	v1.DELETE("/shares/:share_id", s.deleteShare, mw...)
	v1.POST("/shares/:share_id/fork", s.forkShare, mw...)
	v1.GET("/shares/:share_id", s.getShare, s.limitAddr)
	v1.GET("/shares/:share_id/attachments/:attachment_id", s.getShareAttachment, s.limitAddr)
}

// ServeHTTP makes the server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// Routes lists the registered method and path pairs.
func (s *Server) Routes() []*echo.Route { return s.echo.Routes() }

// Metrics returns hooks for the thread service's measurements.
func (s *Server) Metrics() (onPublish func(time.Duration, int), onRunEnd func(thread.RunStatus)) {
	return s.metrics.observePublish, s.metrics.observeRunEnd
}

func (s *Server) ready(c echo.Context) error {
	if s.svc.Draining() {
		// Shutting down: new runs are refused, so a balancer should stop
		// sending traffic here.
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "draining"})
	}
	if s.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		if err := s.cfg.Ready(ctx); err != nil {
			return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": "database unreachable"})
		}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

const callerKey = "threadline.caller"

func caller(c echo.Context) string {
	if v, ok := c.Get(callerKey).(string); ok {
		return v
	}
	return "local"
}

// authenticate maps a bearer key to its caller. Every key is compared in
// constant time, and keys are never logged.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if len(s.cfg.APIKeys) == 0 {
			c.Set(callerKey, "local")
			return next(c)
		}
		ip := c.RealIP()
		if s.authFails != nil && s.authFails.exhausted(ip) {
			return errcode.New(errcode.RateLimited, "too many failed authentications from this address; retry later")
		}
		h := c.Request().Header.Get(echo.HeaderAuthorization)
		token, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || token == "" {
			s.authFailed(ip)
			return errcode.New(errcode.Unauthenticated, "send Authorization: Bearer <api key>")
		}
		found := ""
		for key, who := range s.cfg.APIKeys {
			if subtle.ConstantTimeCompare([]byte(key), []byte(token)) == 1 {
				found = who
			}
		}
		if found == "" {
			s.authFailed(ip)
			return errcode.New(errcode.Unauthenticated, "the API key is not valid")
		}
		c.Set(callerKey, found)
		return next(c)
	}
}

func (s *Server) authFailed(ip string) {
	if s.authFails != nil {
		s.authFails.allow(ip)
	}
}

// limitAddr refuses an address over AddrRateLimit, before its key is
// looked at.
func (s *Server) limitAddr(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.addrs != nil && !s.addrs.allow(c.RealIP()) {
			return errcode.New(errcode.RateLimited, "too many requests from this address; retry in a second")
		}
		return next(c)
	}
}

// secureHeaders marks every response as not to be sniffed, framed, run or
// cached; handlers that serve cacheable bytes (attachments) or streams set
// their own Cache-Control over it.
func secureHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; sandbox")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		return next(c)
	}
}

// errorBody is the wire shape of every error.
type errorBody struct {
	Error errorDetail `json:"error"`
}

// errorDetail is an error's code and message, and the run it names, if any
// (a run_in_progress conflict names the active run).
type errorDetail struct {
	Code      errcode.Code `json:"code"`
	Message   string       `json:"message"`
	RunID     *uuid.UUID   `json:"run_id,omitempty"`
	MessageID *uuid.UUID   `json:"message_id,omitempty"`
	Field     string       `json:"field,omitempty"`
}

func nilUUID(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}

// handleError is echo's one error handler: domain codes through the codes
// table, echo's own errors by their status, anything else a logged 500.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	body := errorDetail{Code: errcode.Internal, Message: "internal error"}
	var he *echo.HTTPError
	de, coded := errcode.As(err)
	switch {
	case coded:
		body = errorDetail{Code: de.Code, Message: de.Message, RunID: nilUUID(de.RunID), MessageID: nilUUID(de.MessageID), Field: de.Field}
	case errors.As(err, &he):
		switch he.Code {
		case http.StatusNotFound:
			body.Code, body.Message = errcode.NotFound, "no such route: "+c.Request().Method+" "+c.Request().URL.Path
		case http.StatusMethodNotAllowed:
			body.Code, body.Message = errcode.MethodNotAllowed, "method "+c.Request().Method+" is not allowed on "+c.Request().URL.Path
		case http.StatusRequestEntityTooLarge:
			body.Code, body.Message = errcode.TooLarge, "request body is too large"
		case http.StatusUnsupportedMediaType:
			body.Code, body.Message = errcode.UnsupportedMediaType, "send a JSON body with Content-Type: application/json"
		case http.StatusBadRequest:
			body.Code, body.Message = errcode.Invalid, "bad request"
		}
	case errors.Is(err, context.Canceled):
		return // the client went away
	}
	st := status(body.Code)
	if st >= http.StatusInternalServerError {
		s.log.Error("request failed", "request_id", c.Response().Header().Get(echo.HeaderXRequestID),
			"method", c.Request().Method, "route", c.Path(), "err", err)
	}
	if st == http.StatusServiceUnavailable || st == http.StatusTooManyRequests {
		// Both pass: say when to come back rather than leave clients to
		// guess (and hammer a recovering database).
		c.Response().Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(st)
		return
	}
	_ = c.JSON(st, errorBody{Error: body})
}

// bind decodes a JSON body strictly: JSON content type (415), size limit
// (413), the text policy (checkText), no unknown fields, right types and one
// value (400).
func (s *Server) bind(c echo.Context, v any, optional bool) error {
	r := c.Request()
	if optional && r.ContentLength == 0 && r.Header.Get(echo.HeaderContentType) == "" {
		return nil
	}
	ct := r.Header.Get(echo.HeaderContentType)
	if mt, _, _ := strings.Cut(ct, ";"); !strings.EqualFold(strings.TrimSpace(mt), echo.MIMEApplicationJSON) {
		return errcode.New(errcode.UnsupportedMediaType, "send a JSON body with Content-Type: application/json (got %q)", ct)
	}
	if r.ContentLength > s.cfg.MaxBody {
		return errcode.New(errcode.TooLarge, "request body is %d bytes; the limit is %d", r.ContentLength, s.cfg.MaxBody)
	}
	b, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, s.cfg.MaxBody))
	if err != nil {
		return decodeError(err, s.cfg.MaxBody, optional)
	}
	if err := checkText(b); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, s.cfg.MaxBody, optional)
	}
	// Anything but white space after the value is refused: dec.More would
	// let a stray "}" or "]" through (FuzzRequestDecoding found "null}").
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errcode.New(errcode.Invalid, "body must hold one JSON value")
	}
	return nil
}

func decodeError(err error, limit int64, optional bool) error {
	var mbe *http.MaxBytesError
	var ute *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &mbe):
		return errcode.New(errcode.TooLarge, "request body is over the %d byte limit", limit)
	case errors.As(err, &ute):
		field := ute.Field
		if field == "" {
			field = "body"
		}
		return errcode.New(errcode.Invalid, "%s must be %s, not %s", field, jsonKind(ute.Type.String()), ute.Value)
	case errors.As(err, &se):
		return errcode.New(errcode.Invalid, "malformed JSON at byte %d: %v", se.Offset, err)
	case errors.Is(err, errEOF) && optional:
		return nil
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return errcode.New(errcode.Invalid, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	var de *errcode.Error
	if errors.As(err, &de) {
		return de
	}
	return errcode.New(errcode.Invalid, "malformed JSON: %v", err)
}

func jsonKind(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "uuid."):
		return "a UUID string"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map"), strings.HasPrefix(goType, "struct"), strings.Contains(goType, "."):
		return "an object"
	}
	return goType
}

// pathUUID parses a path parameter as a UUID (400 otherwise).
func pathUUID(c echo.Context, name string) (uuidValue, error) {
	return parseUUID(name, c.Param(name))
}

// pathRun parses the thread_id and run_id path parameters of a run's
// routes; an invalid one is errcode.Invalid (400).
func pathRun(c echo.Context) (threadID, runID uuidValue, err error) {
	if threadID, err = pathUUID(c, "thread_id"); err != nil {
		return threadID, runID, err
	}
	runID, err = pathUUID(c, "run_id")
	return threadID, runID, err
}
