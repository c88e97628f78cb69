package api

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

type uuidValue = uuid.UUID

var errEOF = io.EOF

// parseUUID parses a UUID named field; "" and null mean uuid.Nil.
func parseUUID(field, s string) (uuid.UUID, error) {
	if s == "" {
		return uuid.Nil, nil
	}
	id, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return uuid.Nil, errcode.New(errcode.Invalid, "%s must be a UUID, got %q", field, s)
	}
	return id, nil
}

func optUUID(field string, s *string) (uuid.UUID, error) {
	if s == nil {
		return uuid.Nil, nil
	}
	if *s == "" {
		return uuid.Nil, errcode.New(errcode.Invalid, "%s must be a UUID or null, got \"\"", field)
	}
	return parseUUID(field, *s)
}

func (s *Server) createThread(c echo.Context) error {
	var body struct {
		ThreadID *string        `json:"thread_id"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := s.bind(c, &body, true); err != nil {
		return err
	}
	id, err := optUUID("thread_id", body.ThreadID)
	if err != nil {
		return err
	}
	var md json.RawMessage
	if body.Metadata != nil {
		md, _ = json.Marshal(body.Metadata)
	}
	t, created, err := s.svc.CreateThread(c.Request().Context(), caller(c), id, md)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, wire.NewThread(t))
}

func (s *Server) listThreads(c echo.Context) error {
	limit := 0
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > s.cfg.MaxPage {
			return errcode.New(errcode.Invalid, "limit must be a whole number between 1 and %d, got %q", s.cfg.MaxPage, v)
		}
		limit = n
	}
	ts, next, err := s.svc.ListThreads(c.Request().Context(), caller(c), limit, c.QueryParam("cursor"))
	if err != nil {
		return err
	}
	var nc *string
	if next != "" {
		nc = &next
	}
	return c.JSON(http.StatusOK, map[string]any{"threads": wire.NewThreads(ts), "next_cursor": nc})
}

func (s *Server) getThread(c echo.Context) error {
	id, err := pathUUID(c, "thread_id")
	if err != nil {
		return err
	}
	t, err := s.svc.GetThread(c.Request().Context(), caller(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.NewThread(t))
}

func (s *Server) patchThread(c echo.Context) error {
	id, err := pathUUID(c, "thread_id")
	if err != nil {
		return err
	}
	var body struct {
		Title    *string        `json:"title"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := s.bind(c, &body, false); err != nil {
		return err
	}
	var u thread.ThreadUpdate
	if body.Title != nil {
		if len(*body.Title) > 200 || !utf8.ValidString(*body.Title) {
			return errcode.New(errcode.Invalid, "title must be valid UTF-8 of at most 200 bytes")
		}
		u.Title = body.Title
	}
	if body.Metadata != nil {
		if err := s.checkBranchLabels(c.Request().Context(), caller(c), id, body.Metadata); err != nil {
			return err
		}
		u.Metadata, _ = json.Marshal(body.Metadata)
	}
	t, err := s.svc.UpdateThread(c.Request().Context(), caller(c), id, u)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.NewThread(t))
}

func (s *Server) deleteThread(c echo.Context) error {
	id, err := pathUUID(c, "thread_id")
	if err != nil {
		return err
	}
	if err := s.svc.DeleteThread(c.Request().Context(), caller(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) getMessages(c echo.Context) error {
	id, err := pathUUID(c, "thread_id")
	if err != nil {
		return err
	}
	snap, err := s.svc.Snapshot(c.Request().Context(), caller(c), id)
	if err != nil {
		return err
	}
	// Written by hand: c.JSON would validate and copy a long thread's
	// tree once more.
	return c.JSONBlob(http.StatusOK, append(wire.AppendThreadSnapshot(nil, snap), '\n'))
}

func (s *Server) putHead(c echo.Context) error {
	id, err := pathUUID(c, "thread_id")
	if err != nil {
		return err
	}
	var body struct {
		MessageID *string `json:"message_id"`
	}
	if err := s.bind(c, &body, false); err != nil {
		return err
	}
	if body.MessageID == nil || *body.MessageID == "" {
		return errcode.New(errcode.Invalid, "message_id is required: the id of the message the client shows")
	}
	mid, err := parseUUID("message_id", *body.MessageID)
	if err != nil {
		return err
	}
	if err := s.svc.SetHead(c.Request().Context(), caller(c), id, mid); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// checkpointJSON is one row of GET /checkpoints: the raw tree for audit.
type checkpointJSON struct {
	CheckpointID       uuid.UUID       `json:"checkpoint_id"`
	ParentCheckpointID *uuid.UUID      `json:"parent_checkpoint_id"`
	MessageID          uuid.UUID       `json:"message_id"`
	Seq                int64           `json:"seq"`
	Role               checkpoint.Role `json:"role"`
	Content            json.RawMessage `json:"content"`
	Status             json.RawMessage `json:"status,omitempty"`
	Attachments        json.RawMessage `json:"attachments,omitempty"`
	RunID              *uuid.UUID      `json:"run_id"`
	CreatedAt          string          `json:"created_at"`
}

func (s *Server) getCheckpoints(c echo.Context) error {
	id, err := pathUUID(c, "thread_id")
	if err != nil {
		return err
	}
	tree, err := s.svc.Checkpoints(c.Request().Context(), caller(c), id)
	if err != nil {
		return err
	}
	out := make([]checkpointJSON, 0, tree.Len())
	for _, n := range tree.Nodes() {
		cj := checkpointJSON{CheckpointID: n.ID, MessageID: n.ID, Seq: n.Seq, Role: n.Role, Content: wire.AppendParts(nil, n.Content),
			CreatedAt: n.CreatedAt.UTC().Format("2006-01-02T15:04:05.999999Z07:00")}
		if n.Status != nil {
			cj.Status = wire.AppendStatus(nil, n.Status)
		}
		if len(n.Attachments) > 0 {
			cj.Attachments = wire.AppendAttachments(nil, n.Attachments)
		}
		if n.ParentID != uuid.Nil {
			p := n.ParentID
			cj.ParentCheckpointID = &p
		}
		if n.RunID != uuid.Nil {
			r := n.RunID
			cj.RunID = &r
		}
		out = append(out, cj)
	}
	return c.JSON(http.StatusOK, map[string]any{"thread_id": id, "checkpoints": out})
}

func (s *Server) listModels(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"models": wire.NewModels(s.svc.Models().List())})
}

// Limits is what GET /api/v1/limits answers: the request limits a client
// can check before it sends, so that it need not upload a file only to
// have it refused.
type Limits struct {
	MaxBodyBytes       int64    `json:"max_body_bytes"`
	MaxMessageBytes    int      `json:"max_message_bytes"`
	MaxAttachmentBytes int64    `json:"max_attachment_bytes"`
	MaxAttachments     int      `json:"max_attachments"`
	AttachmentTypes    []string `json:"attachment_types"`
}

func (s *Server) getLimits(c echo.Context) error {
	return c.JSON(http.StatusOK, Limits{
		MaxBodyBytes:       s.cfg.MaxBody,
		MaxMessageBytes:    s.cfg.MaxMessage,
		MaxAttachmentBytes: s.cfg.MaxAttachment,
		MaxAttachments:     s.cfg.MaxAttachments,
		AttachmentTypes:    s.cfg.AttachmentTypes,
	})
}
