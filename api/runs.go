package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/labstack/echo/v4"

	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
	"github.com/threadline/threadline/thread/errcode"
)

type runBody struct {
	Message *struct {
		ID          *string         `json:"id"`
		Content     json.RawMessage `json:"content"`
		Attachments []struct {
			ID string `json:"id"`
		} `json:"attachments"`
	} `json:"message"`
	ParentMessageID *string           `json:"parent_message_id"`
	SourceMessageID *string           `json:"source_message_id"`
	RunConfig       *thread.RunConfig `json:"run_config"`
	OnDisconnect    string            `json:"on_disconnect"`
	// Continuing a turn that waits (requires_action).
	ToolResults []thread.ToolResult `json:"tool_results"`
	Approvals   []thread.Approval   `json:"approvals"`
}

// decodeContent accepts "text" or an array of text and image parts.
func decodeContent(raw json.RawMessage) ([]checkpoint.Part, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errcode.New(errcode.Invalid, "message.content is required: a string or an array of parts")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, errcode.New(errcode.Invalid, "message.content: %v", err)
		}
		return []checkpoint.Part{{Type: "text", Text: s}}, nil
	}
	if raw[0] != '[' {
		return nil, errcode.New(errcode.Invalid, "message.content must be a string or an array of parts")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var parts []checkpoint.Part
	if err := dec.Decode(&parts); err != nil {
		return nil, errcode.New(errcode.Invalid, "message.content: %v", err)
	}
	return parts, nil
}

func (s *Server) startRun(c echo.Context) error {
	threadID, err := pathUUID(c, "thread_id")
	if err != nil {
		return err
	}
	var body runBody
	if err := s.bind(c, &body, false); err != nil {
		return err
	}
	var req thread.RunRequest
	if req.ParentID, err = optUUID("parent_message_id", body.ParentMessageID); err != nil {
		return err
	}
	if req.SourceID, err = optUUID("source_message_id", body.SourceMessageID); err != nil {
		return err
	}
	if body.RunConfig != nil {
		req.Config = *body.RunConfig
	}
	req.OnDisconnect = body.OnDisconnect
	req.ToolResults, req.Approvals = body.ToolResults, body.Approvals
	if m := body.Message; m != nil {
		um := &thread.UserMessage{}
		if um.ID, err = optUUID("message.id", m.ID); err != nil {
			return err
		}
		if um.Content, err = decodeContent(m.Content); err != nil {
			return err
		}
		size := 0
		for _, p := range um.Content {
			size += len(p.Text) + len(p.Image)
		}
		if size > s.cfg.MaxMessage {
			return errcode.New(errcode.TooLarge, "message is %d bytes; the limit is %d", size, s.cfg.MaxMessage)
		}
		if len(m.Attachments) > s.cfg.MaxAttachments {
			return errcode.New(errcode.TooLarge, "message names %d attachments; the limit is %d", len(m.Attachments), s.cfg.MaxAttachments)
		}
		for i, a := range m.Attachments {
			field := "message.attachments[" + strconv.Itoa(i) + "].id"
			id, err := parseUUID(field, a.ID)
			if err != nil {
				return err
			}
			if slices.Contains(um.AttachmentIDs, id) {
				return &errcode.Error{Code: errcode.Invalid, Message: field + " names an attachment the message names already", Field: field}
			}
			um.AttachmentIDs = append(um.AttachmentIDs, id)
		}
		req.Message = um
	}
	release, err := s.streams.acquire(caller(c), uuid.Nil, s.streamLimits())
	if err != nil {
		return err
	}
	defer release()
	ctx := c.Request().Context()
	run, _, err := s.svc.StartRun(ctx, caller(c), threadID, req)
	if err != nil {
		return err
	}
	return s.stream(c, run, 0, req.OnDisconnect)
}

func (s *Server) rejoinRun(c echo.Context) error {
	threadID, runID, err := pathRun(c)
	if err != nil {
		return err
	}
	var after int64
	if v := c.QueryParam("after"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
			return errcode.New(errcode.Invalid, "after must be a whole number >= 0, got %q", v)
		}
	}
	release, err := s.streams.acquire(caller(c), runID, s.streamLimits())
	if err != nil {
		return err
	}
	defer release()
	run, err := s.svc.FindRun(c.Request().Context(), caller(c), threadID, runID)
	if err != nil {
		return err
	}
	return s.stream(c, run, after, "continue")
}

// streamBufs holds the streams' write buffers. A live stream flushes after
// nearly every token, so the buffer only gathers a catch-up or a burst;
// streamBufSize keeps a thousand streams' buffers small, and the pool keeps
// a new stream from allocating (and the kernel from faulting in) a fresh
// one.
var streamBufs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, streamBufSize) }}

const streamBufSize = 4 << 10

// stream writes the run's events as NDJSON, flushing whenever no further
// event is ready, until the final snapshot or the client leaves.
func (s *Server) stream(c echo.Context, run *thread.Run, after int64, onDisconnect string) error {
	ctx := c.Request().Context()
	w := c.Response()
	h := w.Header()
	rc := http.NewResponseController(w.Writer)
	bw := streamBufs.Get().(*bufio.Writer)
	bw.Reset(w.Writer)
	defer func() {
		bw.Reset(nil)
		streamBufs.Put(bw)
	}()
	s.metrics.streams.Inc()
	defer s.metrics.streams.Dec()
	// The server's read and write timeouts are for ordinary requests; a
	// stream lives as long as its run. What bounds it instead is the stall
	// timeout: a write that cannot go out for that long (a reader that
	// stopped reading) ends the stream, freeing what it holds, and the
	// client rejoins from the last sequence it read.
	_ = rc.SetReadDeadline(time.Time{})
	dl := streamDeadline{rc: rc, stall: s.cfg.StallTimeout}
	dl.refresh()
	var line []byte
	// The status goes out with the first event, once the run is durable:
	// a run that could not be saved still gets a JSON error.
	started := false
	start := func() {
		if !started {
			started = true
			h.Set(echo.HeaderContentType, "application/x-ndjson")
			h.Set("Cache-Control", "no-store")
			h.Set("X-Accel-Buffering", "no")
			h.Set("X-Run-Id", run.ID.String())
			w.WriteHeader(http.StatusOK)
		}
	}
	err := s.svc.FollowRun(ctx, caller(c), run, after, func(ev thread.Event, more bool) error {
		start()
		dl.refresh()
		// One line buffer for the stream: a token's line, most of a
		// stream, allocates nothing.
		line = wire.AppendEventLine(line[:0], &ev)
		if _, err := bw.Write(line); err != nil {
			return err
		}
		if more {
			return nil
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		return rc.Flush()
	})
	if ctx.Err() != nil {
		if onDisconnect == "cancel" {
			if cerr := s.svc.CancelRun(context.WithoutCancel(ctx), caller(c), run.ThreadID, run.ID); cerr != nil {
				s.log.Warn("cancel on disconnect", "run_id", run.ID, "err", cerr)
			}
		}
		return nil
	}
	if err != nil && !started {
		return err
	}
	if errors.Is(err, engine.ErrShuttingDown) {
		// A run of another process outlives this one: the client rejoins
		// it elsewhere.
		s.log.Info("stream ended by shutdown; the client rejoins elsewhere", "run_id", run.ID, "request_id", h.Get(echo.HeaderXRequestID))
		return nil
	}
	if err != nil {
		// Headers are sent; the client sees the stream end early and rejoins.
		s.log.Error("stream run", "run_id", run.ID, "request_id", h.Get(echo.HeaderXRequestID), "err", err)
		return nil
	}
	start() // a rejoin after the last event: an empty stream
	dl.refresh()
	if err := bw.Flush(); err != nil {
		return nil
	}
	_ = rc.Flush()
	return nil
}

// streamDeadline keeps a stream's write deadline stall ahead of its
// writes, resetting it only when a quarter of it has passed (not per token).
type streamDeadline struct {
	rc    *http.ResponseController
	stall time.Duration
	set   time.Time
}

func (d *streamDeadline) refresh() {
	if d.stall <= 0 {
		if d.set.IsZero() {
			d.set = time.Now()
			_ = d.rc.SetWriteDeadline(time.Time{})
		}
		return
	}
	now := time.Now()
	if now.Sub(d.set) < d.stall/4 {
		return
	}
	d.set = now
	_ = d.rc.SetWriteDeadline(now.Add(d.stall))
}

func (s *Server) cancelRun(c echo.Context) error {
	threadID, runID, err := pathRun(c)
	if err != nil {
		return err
	}
	if err := s.svc.CancelRun(c.Request().Context(), caller(c), threadID, runID); err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]any{"run_id": runID, "status": "cancelling"})
}

func (s *Server) getRun(c echo.Context) error {
	threadID, runID, err := pathRun(c)
	if err != nil {
		return err
	}
	r, err := s.svc.GetRun(c.Request().Context(), caller(c), threadID, runID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.NewRun(r))
}
