package api

// Share links: a read-only link to one message's branch, readable without
// credentials, revocable by its owner, and continued as a new thread of
// the viewer's.

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// ShareStore keeps share links. Every method returns not_found for a share
// that does not exist, was revoked or has expired, and for another
// caller's thread.
type ShareStore interface {
	// ShareCreate stores sh; the thread must be sh.Caller's and hold
	// sh.CheckpointID.
	ShareCreate(ctx context.Context, sh *thread.Share) error
	// ShareGet returns a live share, whoever asks.
	ShareGet(ctx context.Context, id uuid.UUID) (*thread.Share, error)
	// ShareList returns the caller's shares of a thread.
	ShareList(ctx context.Context, caller string, threadID uuid.UUID) ([]*thread.Share, error)
	// ShareDelete revokes the caller's share.
	ShareDelete(ctx context.Context, caller string, id uuid.UUID) error
	// ShareFork writes a new thread holding a copy of a shared path.
	ShareFork(ctx context.Context, f thread.ShareFork) error
}

func shareURL(id uuid.UUID) string { return "/api/v1/shares/" + id.String() }

// shareJSON is a share as its owner lists it.
type shareJSON struct {
	ShareID   uuid.UUID  `json:"share_id"`
	URL       string     `json:"url"`
	MessageID uuid.UUID  `json:"message_id"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"`
}

func newShareJSON(sh *thread.Share) shareJSON {
	return shareJSON{ShareID: sh.ID, URL: shareURL(sh.ID), MessageID: sh.MessageID, CreatedAt: sh.CreatedAt, ExpiresAt: sh.ExpiresAt}
}

// shareTarget is the checkpoint a share of messageID freezes: the newest
// checkpoint of that message's turn (the checkpoint itself when it names
// one inside a continued turn), and the message's wire id.
func shareTarget(tree *checkpoint.Tree, messageID uuid.UUID) (wire, cp uuid.UUID, ok bool) {
	if tree.Get(messageID) == nil {
		return uuid.Nil, uuid.Nil, false
	}
	wire = tree.WireID(messageID)
	if wire != messageID {
		return wire, messageID, true
	}
	return wire, tree.TurnTip(messageID).ID, true
}

func parseExpiry(s *string, now time.Time) (*time.Time, error) {
	if s == nil {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return nil, &errcode.Error{Code: errcode.Invalid, Message: "expires_at must be an RFC 3339 time, got " + *s, Field: "expires_at"}
	}
	if !t.After(now) {
		return nil, &errcode.Error{Code: errcode.Invalid, Message: "expires_at must be in the future", Field: "expires_at"}
	}
	t = t.UTC().Truncate(time.Microsecond)
	return &t, nil
}

func (s *Server) createShare(c echo.Context) error {
	threadID, err := pathUUID(c, "thread_id")
	if err != nil {
		return err
	}
	var body struct {
		MessageID *string `json:"message_id"`
		ExpiresAt *string `json:"expires_at"`
	}
	if err := s.bind(c, &body, false); err != nil {
		return err
	}
	if body.MessageID == nil {
		return &errcode.Error{Code: errcode.Invalid, Message: "message_id is required", Field: "message_id"}
	}
	msg, err := parseUUID("message_id", *body.MessageID)
	if err != nil || msg == uuid.Nil {
		return &errcode.Error{Code: errcode.Invalid, Message: "message_id must be a UUID", Field: "message_id"}
	}
	exp, err := parseExpiry(body.ExpiresAt, time.Now())
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	tree, err := s.svc.Checkpoints(ctx, caller(c), threadID)
	if err != nil {
		return err
	}
	wire, cp, ok := shareTarget(tree, msg)
	if !ok {
		return errcode.New(errcode.NotFound, "message %s not found in thread %s", msg, threadID)
	}
	sh := &thread.Share{ID: uuid.New(), ThreadID: threadID, MessageID: wire, CheckpointID: cp, Caller: caller(c), ExpiresAt: exp}
	if err := s.cfg.Shares.ShareCreate(ctx, sh); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, newShareJSON(sh))
}

func (s *Server) listShares(c echo.Context) error {
	threadID, err := pathUUID(c, "thread_id")
	if err != nil {
		return err
	}
	shs, err := s.cfg.Shares.ShareList(c.Request().Context(), caller(c), threadID)
	if err != nil {
		return err
	}
	out := make([]shareJSON, len(shs))
	for i, sh := range shs {
		out[i] = newShareJSON(sh)
	}
	return c.JSON(http.StatusOK, map[string]any{"shares": out})
}

func (s *Server) deleteShare(c echo.Context) error {
	id, err := pathShare(c)
	if err != nil {
		return err
	}
	if err := s.cfg.Shares.ShareDelete(c.Request().Context(), caller(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// pathShare parses the share_id path parameter. A malformed id is
// not_found like an unknown one: the id is a secret, not input to correct.
func pathShare(c echo.Context) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Param("share_id"))
	if err != nil || len(c.Param("share_id")) != 36 {
		return uuid.Nil, errcode.New(errcode.NotFound, "share not found")
	}
	return id, nil
}

// sharedTree reads a live share and its thread's tree as the owner's; the
// caller must show nothing of the tree beyond the share's path.
func (s *Server) sharedTree(c echo.Context) (*thread.Share, *checkpoint.Tree, error) {
	id, err := pathShare(c)
	if err != nil {
		return nil, nil, err
	}
	ctx := c.Request().Context()
	sh, err := s.cfg.Shares.ShareGet(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	tree, err := s.svc.Checkpoints(ctx, sh.Caller, sh.ThreadID)
	if err != nil {
		if errcode.Of(err) == errcode.NotFound {
			return nil, nil, errcode.New(errcode.NotFound, "share %s not found", id)
		}
		return nil, nil, err
	}
	return sh, tree, nil
}

func (s *Server) getShare(c echo.Context) error {
	sh, tree, err := s.sharedTree(c)
	if err != nil {
		return err
	}
	msgs := thread.SharePath(tree, sh.CheckpointID, sh.ID)
	if msgs == nil {
		return errcode.New(errcode.NotFound, "share %s not found", sh.ID)
	}
	return c.JSON(http.StatusOK, struct {
		ShareID   uuid.UUID       `json:"share_id"`
		Title     *string         `json:"title"`
		CreatedAt time.Time       `json:"created_at"`
		ExpiresAt *time.Time      `json:"expires_at"`
		Messages  json.RawMessage `json:"messages"`
	}{sh.ID, sh.Title, sh.CreatedAt, sh.ExpiresAt, wire.AppendMessages(nil, msgs)})
}

// getShareAttachment serves an attachment of the shared path, and only
// those: any other id is not_found, whoever owns it.
func (s *Server) getShareAttachment(c echo.Context) error {
	sh, tree, err := s.sharedTree(c)
	if err != nil {
		return err
	}
	id, err := uuid.Parse(c.Param("attachment_id"))
	if err != nil || !thread.PathAttachments(tree, sh.CheckpointID)[id] || s.cfg.Attachments == nil {
		return errcode.New(errcode.NotFound, "attachment %s not found in this share", c.Param("attachment_id"))
	}
	a, err := s.cfg.Attachments.AttachmentGet(c.Request().Context(), sh.Caller, id)
	if err != nil {
		return err
	}
	// A share can be revoked: the bytes are not cached for long.
	return serveFile(c, a, "private, max-age=60")
}

func (s *Server) forkShare(c echo.Context) error {
	sh, tree, err := s.sharedTree(c)
	if err != nil {
		return err
	}
	th := &thread.Thread{ID: uuid.New(), Caller: caller(c), Title: sh.Title}
	nodes, atts := thread.ForkPath(tree, sh.CheckpointID, th.ID)
	if nodes == nil {
		return errcode.New(errcode.NotFound, "share %s not found", sh.ID)
	}
	if err := s.cfg.Shares.ShareFork(c.Request().Context(), thread.ShareFork{Thread: th, Nodes: nodes, Owner: sh.Caller, Attachments: atts}); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"thread_id": th.ID})
}
