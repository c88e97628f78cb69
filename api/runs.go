package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/labstack/echo/v4"

	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

type runBody struct {
	Message *struct {
		ID          *string         `json:"id"`
		Content     json.RawMessage `json:"content"`
		Attachments []struct {
			ID string `json:"id"`
		} `json:"attachments"`
	} `json:"message"`
	ParentMessageID *string         `json:"parent_message_id"`
	SourceMessageID *string         `json:"source_message_id"`
	RunConfig       *wire.RunConfig `json:"run_config"`
	OnDisconnect    string          `json:"on_disconnect"`
	// Continuing a turn that waits (requires_action).
	ToolResults []wire.ToolResultBody `json:"tool_results"`
	Approvals   []wire.Approval       `json:"approvals"`
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
	var parts []wire.Part
	if err := dec.Decode(&parts); err != nil {
		return nil, errcode.New(errcode.Invalid, "message.content: %v", err)
	}
	return wire.DomainParts(parts), nil
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
		req.Config = body.RunConfig.Domain()
	}
	req.OnDisconnect = body.OnDisconnect
	req.ToolResults, req.Approvals = wire.DomainToolResults(body.ToolResults), wire.DomainApprovals(body.Approvals)
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

// stream writes the run's events as NDJSON, flushing whenever no further
// event is ready, until the final snapshot or the client leaves.
func (s *Server) stream(c echo.Context, run *thread.Run, after int64, onDisconnect string) error {
	o, closeOut := s.openStream(c, "application/x-ndjson", map[string]string{"X-Run-Id": run.ID.String()})
	defer closeOut()
	var line []byte // one line buffer: a token's line, most of a stream, allocates nothing
	err := s.svc.FollowRun(c.Request().Context(), caller(c), run, after, func(ev thread.Event, more bool) error {
		line = wire.AppendEventLine(line[:0], &ev)
		err := o.write(line)
		if cap(line) > streamBufSize {
			line = nil // a snapshot's: not kept for the stream's life
		}
		if err != nil {
			return err
		}
		if more {
			return nil
		}
		return o.flush()
	})
	if err != nil || c.Request().Context().Err() != nil {
		return s.endStream(c, o, run, onDisconnect, err)
	}
	o.start() // a rejoin after the last event: an empty stream
	o.dl.refresh()
	_ = o.flush()
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
