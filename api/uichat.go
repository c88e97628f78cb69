package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// The AI SDK UI message stream routes (POST /ui/chat, GET
// /ui/chat/{id}/stream) are a second encoding of the same runs: a request
// becomes a native run request, the run starts and is followed exactly as
// POST /threads/{id}/runs/stream does, and its durable events are written
// as UI message chunks (uiEncoder) instead of NDJSON.

// uiChatBody is what the AI SDK's HttpChatTransport sends (id, messages,
// trigger, messageId), plus Threadline's optional run_config, plus what
// assistant-ui's AssistantChatTransport adds: system (the run's system
// prompt unless run_config has one), tools (frontend tools: none may be
// declared, the route runs no client tools), callSettings, config and
// metadata (not read).
type uiChatBody struct {
	ID        string            `json:"id"`
	Messages  []json.RawMessage `json:"messages"`
	Trigger   string            `json:"trigger"`
	MessageID *string           `json:"messageId"`
	RunConfig *wire.RunConfig   `json:"run_config"`
	// OnDisconnect is the native on_disconnect: "continue" (the default:
	// a reload resumes) or "cancel" (closing the stream, as useChat's
	// stop() does, cancels the run).
	OnDisconnect string `json:"on_disconnect"`

	System       *string         `json:"system"`
	Tools        json.RawMessage `json:"tools"`
	CallSettings json.RawMessage `json:"callSettings"`
	Config       json.RawMessage `json:"config"`
	Metadata     json.RawMessage `json:"metadata"`
}

// noTools reports whether a tools member declares no tool: absent, null,
// {} or [].
func noTools(raw json.RawMessage) bool {
	switch strings.Join(strings.Fields(string(raw)), "") {
	case "", "null", "{}", "[]":
		return true
	}
	return false
}

// uiMessage is the part of a UIMessage the routes read; the rest of it
// (metadata, assistant parts) is the client's and is not checked.
type uiMessage struct {
	ID    string `json:"id"`
	Role  string `json:"role"`
	Parts []struct {
		Type      string `json:"type"`
		Text      string `json:"text"`
		MediaType string `json:"mediaType"`
		URL       string `json:"url"`
	} `json:"parts"`
}

// uiChatNamespace derives thread and message ids from chat and message
// ids that are not UUIDs (useChat makes short random ids).
var uiChatNamespace = uuid.MustParse("6f1c1d2e-9a4b-5c3d-8e7f-0a1b2c3d4e5f")

// chatThreadID is the thread of chat id: the id itself when it is a
// UUID, else a name-based UUID of it, the same every time.
func chatThreadID(id string) (uuid.UUID, error) {
	if id == "" {
		return uuid.Nil, errcode.New(errcode.Invalid, "id (the chat id) is required")
	}
	if len(id) > 256 {
		return uuid.Nil, errcode.New(errcode.Invalid, "id (the chat id) is over 256 characters")
	}
	if u, err := uuid.Parse(id); err == nil && len(id) == 36 {
		return u, nil
	}
	return uuid.NewSHA1(uiChatNamespace, []byte("chat:"+id)), nil
}

// chatMessageID is the Threadline id of a UI message id: the id itself
// when it is a UUID, else a name-based UUID of it within the thread.
func chatMessageID(threadID uuid.UUID, id string) uuid.UUID {
	if u, err := uuid.Parse(id); err == nil && len(id) == 36 {
		return u
	}
	return uuid.NewSHA1(threadID, []byte("message:"+id))
}

func (s *Server) uiChat(c echo.Context) error {
	var body uiChatBody
	if err := s.bind(c, &body, false); err != nil {
		return err
	}
	threadID, err := chatThreadID(body.ID)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var tree *checkpoint.Tree
	var leaf uuid.UUID
	snap, err := s.svc.Snapshot(ctx, caller(c), threadID)
	switch {
	case err == nil:
		tree = snap.Tree
		if cp, _, _ := snap.Export(); cp != nil {
			leaf = *cp
		}
	case errcode.Of(err) == errcode.NotFound:
		tree = &checkpoint.Tree{} // a new chat: its first run creates the thread
	default:
		return err
	}
	req, err := s.uiRunRequest(&body, threadID, tree, leaf)
	if err != nil {
		return err
	}
	release, err := s.streams.acquire(caller(c), uuid.Nil, s.streamLimits())
	if err != nil {
		return err
	}
	defer release()
	run, _, err := s.svc.StartRun(ctx, caller(c), threadID, req)
	if err != nil {
		return err
	}
	return s.uiStream(c, run, 0, req.OnDisconnect)
}

// uiRunRequest maps a chat request to the native run request over the
// thread's tree: a submit appends the last message, a user message, under
// the message before it (or the thread's leaf), or edits it when the
// thread has it already with other content; a regenerate forks at the
// user message above the reply (messageId names the reply). invalid_request
// for a malformed request, invalid_fork when it names no message of the
// thread where it must.
func (s *Server) uiRunRequest(b *uiChatBody, threadID uuid.UUID, tree *checkpoint.Tree, leaf uuid.UUID) (thread.RunRequest, error) {
	var req thread.RunRequest
	if b.RunConfig != nil {
		req.Config = b.RunConfig.Domain()
	}
	req.OnDisconnect = b.OnDisconnect
	if b.System != nil && req.Config.System == "" {
		req.Config.System = *b.System
	}
	if !noTools(b.Tools) {
		return req, errcode.New(errcode.Invalid, "tools: frontend tools are not run over /ui/chat; declare client tools in run_config.tools of the native run API")
	}
	if len(b.Messages) == 0 {
		return req, errcode.New(errcode.Invalid, "messages must hold at least the message to answer")
	}
	msgs := make([]uiMessage, len(b.Messages))
	for i, raw := range b.Messages {
		if err := json.Unmarshal(raw, &msgs[i]); err != nil {
			return req, errcode.New(errcode.Invalid, "messages[%d] is not a UI message: %v", i, err)
		}
	}
	last := msgs[len(msgs)-1]
	switch b.Trigger {
	case "submit-message":
		return s.uiSubmit(req, msgs, threadID, tree, leaf)
	case "regenerate-message":
		if b.MessageID != nil && *b.MessageID != "" {
			n := tree.Get(chatMessageID(threadID, *b.MessageID))
			if n == nil || n.Role != checkpoint.RoleAssistant {
				return req, errcode.New(errcode.InvalidFork, "messageId %q names no assistant message of this chat", *b.MessageID)
			}
			req.ParentID, req.SourceID = n.ParentID, n.ID
			return req, nil
		}
		if last.Role != "user" {
			return req, errcode.New(errcode.Invalid, "a regenerate without messageId needs the user message to answer last in messages")
		}
		req.ParentID = chatMessageID(threadID, last.ID)
		if tree.Get(req.ParentID) == nil {
			return req, errcode.New(errcode.InvalidFork, "messages[%d] (id %q) is not a message of this chat", len(msgs)-1, last.ID)
		}
		return req, nil
	}
	return req, errcode.New(errcode.Invalid, "trigger must be \"submit-message\" or \"regenerate-message\", got %q", b.Trigger)
}

// uiSubmit maps a submit: see uiRunRequest.
func (s *Server) uiSubmit(req thread.RunRequest, msgs []uiMessage, threadID uuid.UUID, tree *checkpoint.Tree, leaf uuid.UUID) (thread.RunRequest, error) {
	i := len(msgs) - 1
	last := msgs[i]
	if last.Role != "user" {
		return req, errcode.New(errcode.Invalid, "messages[%d] must be the user message to send, not a %q message", i, last.Role)
	}
	content, err := s.uiContent(i, &last)
	if err != nil {
		return req, err
	}
	id := chatMessageID(threadID, last.ID)
	um := &thread.UserMessage{ID: id, Content: content}
	req.Message = um
	if n := tree.Get(id); n != nil {
		if n.Role != checkpoint.RoleUser {
			return req, errcode.New(errcode.InvalidFork, "messages[%d] (id %q) is a %s message of this chat, not a user message", i, last.ID, n.Role)
		}
		req.ParentID = n.ParentID
		if !sameText(n.Content, content) {
			// An edit: a new message beside the old one (the old id
			// stays with the old content).
			um.ID, req.SourceID = uuid.Nil, n.ID
		}
		// Same content: the same request again, which the native
		// idempotency answers with the run it started.
		return req, nil
	}
	req.ParentID = leaf
	if i > 0 {
		if p := tree.Get(chatMessageID(threadID, msgs[i-1].ID)); p != nil {
			req.ParentID = p.ID
		}
	}
	return req, nil
}

// uiContent is a user UI message's parts as native content: text parts,
// and file parts of images (by URL or data URL). invalid_request for other
// parts or a message over the size limit.
func (s *Server) uiContent(i int, m *uiMessage) ([]checkpoint.Part, error) {
	var out []checkpoint.Part
	size := 0
	for j, p := range m.Parts {
		switch {
		case p.Type == "text":
			out = append(out, checkpoint.Part{Type: checkpoint.PartText, Text: p.Text})
			size += len(p.Text)
		case p.Type == "file" && strings.HasPrefix(p.MediaType, "image/") && p.URL != "":
			out = append(out, checkpoint.Part{Type: checkpoint.PartImage, Image: p.URL})
			size += len(p.URL)
		case p.Type == "step-start":
		default:
			return nil, errcode.New(errcode.Invalid, "messages[%d].parts[%d]: a user message holds text and image file parts, not %q", i, j, p.Type)
		}
	}
	if len(out) == 0 {
		return nil, errcode.New(errcode.Invalid, "messages[%d] has no text to send", i)
	}
	if size > s.cfg.MaxMessage {
		return nil, errcode.New(errcode.TooLarge, "message is %d bytes; the limit is %d", size, s.cfg.MaxMessage)
	}
	return out, nil
}

func sameText(a, b []checkpoint.Part) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Type != b[i].Type || a[i].Text != b[i].Text || a[i].Image != b[i].Image {
			return false
		}
	}
	return true
}

// uiResumeWindow is how long after its end a chat's last run is still
// replayed by GET /ui/chat/{id}/stream (a reload just after the reply
// ended gets it whole); later the route answers 204.
const uiResumeWindow = 5 * time.Minute

// uiChatStream is useChat's resumeStream(): the chat's running run, or
// the run of its head reply if that ended within uiResumeWindow, replayed
// from the durable log (after Last-Event-ID, when sent) and followed live
// to its end; 204 when there is none.
func (s *Server) uiChatStream(c echo.Context) error {
	id := c.Param("id")
	if c.Request().URL.RawPath != "" {
		// echo routed on the escaped path (the id holds an escaped "/"):
		// its parameter is still escaped.
		u, err := url.PathUnescape(id)
		if err != nil {
			return errcode.New(errcode.Invalid, "the chat id in the path is not validly escaped")
		}
		id = u
	}
	threadID, err := chatThreadID(id)
	if err != nil {
		return err
	}
	var after int64
	if v := c.Request().Header.Get("Last-Event-ID"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
			return errcode.New(errcode.Invalid, "Last-Event-ID must be a whole number >= 0 (a sequence), got %q", v)
		}
	}
	ctx := c.Request().Context()
	snap, err := s.svc.Snapshot(ctx, caller(c), threadID)
	if errcode.Of(err) == errcode.NotFound {
		return c.NoContent(http.StatusNoContent)
	}
	if err != nil {
		return err
	}
	runID := resumeRunID(snap)
	if runID == uuid.Nil {
		return c.NoContent(http.StatusNoContent)
	}
	release, err := s.streams.acquire(caller(c), runID, s.streamLimits())
	if err != nil {
		return err
	}
	defer release()
	run, err := s.svc.FindRun(ctx, caller(c), threadID, runID)
	if err != nil {
		return err
	}
	if snap.ActiveRun == nil && (run.FinishedAt == nil || time.Since(*run.FinishedAt) > uiResumeWindow) {
		return c.NoContent(http.StatusNoContent)
	}
	return s.uiStream(c, run, after, "continue")
}

// resumeRunID is the run a resume follows: the running one, else the run
// of the head reply; uuid.Nil for none.
func resumeRunID(snap *thread.ThreadSnapshot) uuid.UUID {
	if a := snap.ActiveRun; a != nil {
		return a.RunID
	}
	if _, path, _ := snap.Export(); len(path) > 0 {
		if m := path[len(path)-1]; m.Role == checkpoint.RoleAssistant && m.Metadata.RunID != nil {
			return *m.Metadata.RunID
		}
	}
	return uuid.Nil
}

// uiStream writes the run's events from the first as UI message chunks
// over SSE, leaving out the chunks of events up to after (the client has
// them), until the final snapshot (then finish and [DONE]) or the client
// leaves (cancelling the run if onDisconnect is "cancel"). Like stream,
// headers go out with the first event.
func (s *Server) uiStream(c echo.Context, run *thread.Run, after int64, onDisconnect string) error {
	ctx := c.Request().Context()
	o, closeOut := s.openStream(c, "text/event-stream", map[string]string{"X-Vercel-AI-UI-Message-Stream": "v1",
		"X-Run-Id": run.ID.String(), "X-Thread-Id": run.ThreadID.String()})
	defer closeOut()
	enc := &uiEncoder{run: run}
	var buf []byte
	err := s.svc.FollowRun(ctx, caller(c), run, 0, func(ev thread.Event, more bool) error {
		o.start()
		o.dl.refresh()
		chunks := enc.add(&ev)
		if enc.done {
			chunks = append(chunks, s.uiFinish(ctx, c, run, enc.status))
		}
		if ev.Sequence <= after {
			return nil
		}
		buf = buf[:0]
		for i := range chunks {
			var err error
			if buf, err = appendSSE(buf, ev.Sequence, &chunks[i]); err != nil {
				return err
			}
		}
		if enc.done {
			buf = append(buf, "data: [DONE]\n\n"...)
		}
		if err := o.write(buf); err != nil {
			return err
		}
		if more && !enc.done {
			return nil
		}
		return o.flush()
	})
	return s.endStream(c, o, run, onDisconnect, err)
}

// uiFinish is the finish chunk: the run read again after its end for its
// usage and model (without them if that read fails).
func (s *Server) uiFinish(ctx context.Context, c echo.Context, run *thread.Run, status thread.RunStatus) uiChunk {
	r, err := s.svc.GetRun(ctx, caller(c), run.ThreadID, run.ID)
	if err != nil {
		r = run
	}
	return uiChunk{Type: "finish", MessageMetadata: finishMeta(r, status)}
}
