package api

import (
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// forkThread copies the path from the root to a message of the caller's
// thread into a new thread of the caller's (new ids, head the message's
// newest checkpoint, attachments copied), the way continuing a share does:
// invalid for a missing or malformed message_id, not_found for another
// caller's thread or a message not in it.
func (s *Server) forkThread(c echo.Context) error {
	threadID, err := pathUUID(c, "thread_id")
	if err != nil {
		return err
	}
	var body struct {
		MessageID *string `json:"message_id"`
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
	ctx := c.Request().Context()
	who := caller(c)
	src, err := s.svc.GetThread(ctx, who, threadID)
	if err != nil {
		return err
	}
	tree, err := s.svc.Checkpoints(ctx, who, threadID)
	if err != nil {
		return err
	}
	_, cp, ok := shareTarget(tree, msg)
	if !ok {
		return errcode.New(errcode.NotFound, "message %s not found in thread %s", msg, threadID)
	}
	th := &thread.Thread{ID: uuid.New(), Caller: who, Title: src.Title, Metadata: src.Metadata}
	nodes, atts := thread.ForkPath(tree, cp, th.ID)
	if nodes == nil {
		return errcode.New(errcode.NotFound, "message %s not found in thread %s", msg, threadID)
	}
	if err := s.cfg.Shares.ShareFork(ctx, thread.ShareFork{Thread: th, Nodes: nodes, Owner: who, Attachments: atts}); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"thread_id": th.ID})
}
