// Package export moves threads in and out of Threadline: a thread's whole
// tree as a versioned JSON document (Document) or its shown branch as a
// Markdown audit trail (Markdown), and the reading of such documents and
// of other products' exports (ChatGPT's conversations.json and its ZIP,
// Open WebUI's chat export) into trees to import (Reader).
//
// It is pure Go: no database, no HTTP. The same tree always gives the same
// bytes.
package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// The JSON document's format name and version.
const (
	Format  = "threadline.thread"
	Version = 1
)

// Document is a whole thread, format "threadline.thread" version 1: the
// thread row, every checkpoint in Seq order with its parent, the runs'
// metadata and usage, and the head. docs/export.md describes it.
type Document struct {
	Format      string       `json:"format"`
	Version     int          `json:"version"`
	Thread      DocThread    `json:"thread"`
	Head        *uuid.UUID   `json:"head"`
	Checkpoints []Checkpoint `json:"checkpoints"`
	Runs        []DocRun     `json:"runs"`
}

// DocThread is the thread row.
type DocThread struct {
	ID        uuid.UUID       `json:"thread_id"`
	Title     *string         `json:"title"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	Metadata  json.RawMessage `json:"metadata"`
}

// Checkpoint is one message of the tree: its parts in the snapshot's
// message shape (assistant-ui's), attachments by reference. Its JSON is
// document_json.go's.
type Checkpoint struct {
	ID          uuid.UUID
	ParentID    *uuid.UUID
	Seq         int64
	Role        checkpoint.Role
	Content     []checkpoint.Part
	Status      *checkpoint.Status
	Attachments []Attachment
	RunID       *uuid.UUID
	CreatedAt   time.Time
}

// Attachment is an attachment as the message carries it (id, name, type,
// size, …) and, in an export made with attachments=inline, its bytes
// (base64 in JSON).
type Attachment struct {
	checkpoint.Attachment
	Data []byte
}

// DocRun is one run's metadata: what it was asked, by which model, when,
// how it ended and what it cost.
type DocRun struct {
	ID            uuid.UUID        `json:"run_id"`
	Status        thread.RunStatus `json:"status"`
	UserMessageID *uuid.UUID       `json:"user_message_id"`
	ParentID      uuid.UUID        `json:"parent_message_id"`
	MessageID     uuid.UUID        `json:"message_id"`
	Model         string           `json:"model"`
	Config        wire.RunConfig   `json:"run_config"`
	Usage         *wire.Usage      `json:"usage"`
	Error         *wire.RunError   `json:"error"`
	StartedAt     time.Time        `json:"started_at"`
	EndedAt       *time.Time       `json:"ended_at"`
}

// AttachmentData returns an attachment's bytes for an inline export; nil
// leaves the attachment by reference.
type AttachmentData func(id string) ([]byte, error)

// Build returns the document of a whole thread. Its head is the thread's
// head resolved to a leaf (null for an empty thread). With data, every
// attachment carries its bytes.
func Build(x *thread.ThreadExport, data AttachmentData) (*Document, error) {
	t := x.Thread
	md := t.Metadata
	if len(bytes.TrimSpace(md)) == 0 {
		md = json.RawMessage(`{}`)
	}
	d := &Document{Format: Format, Version: Version, Checkpoints: make([]Checkpoint, 0, len(x.Nodes)), Runs: make([]DocRun, 0, len(x.Runs)),
		Thread: DocThread{ID: t.ID, Title: t.Title, CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.UpdatedAt.UTC(), Metadata: compactJSON(md)}}
	tree, err := checkpoint.NewTree(x.Nodes)
	if err != nil {
		return nil, fmt.Errorf("thread %s: %w", t.ID, err)
	}
	if h := tree.ResolveHead(t.HeadID); h != uuid.Nil {
		d.Head = &h
	}
	for i := range x.Nodes {
		c, err := docCheckpoint(&x.Nodes[i], data)
		if err != nil {
			return nil, err
		}
		d.Checkpoints = append(d.Checkpoints, c)
	}
	for _, r := range x.Runs {
		d.Runs = append(d.Runs, docRun(r))
	}
	return d, nil
}

func docCheckpoint(n *checkpoint.Node, data AttachmentData) (Checkpoint, error) {
	c := Checkpoint{ID: n.ID, ParentID: optID(n.ParentID), Seq: n.Seq, Role: n.Role, Content: checkpoint.Compacted(n.Content),
		Status: n.Status, RunID: optID(n.RunID), CreatedAt: n.CreatedAt.UTC()}
	if c.Content == nil {
		c.Content = []checkpoint.Part{}
	}
	for _, a := range n.Attachments {
		da := Attachment{Attachment: a}
		if data != nil {
			b, err := data(a.ID)
			if err != nil {
				return c, fmt.Errorf("attachment %s of message %s: %w", a.ID, n.ID, err)
			}
			da.Data = b
		}
		c.Attachments = append(c.Attachments, da)
	}
	return c, nil
}

func docRun(r *thread.Run) DocRun {
	out := DocRun{ID: r.ID, Status: r.Status, UserMessageID: optID(r.UserMessageID), ParentID: r.ParentID, MessageID: r.MessageID,
		Model: r.Model, Config: wire.NewRunConfig(&r.Config), Usage: wire.NewUsage(r.Usage), Error: wire.NewRunError(r.Error), StartedAt: r.CreatedAt.UTC()}
	if r.FinishedAt != nil {
		f := r.FinishedAt.UTC()
		out.EndedAt = &f
	}
	return out
}

func optID(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}

func compactJSON(b json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// Encode writes the document as indented JSON with a final newline: the
// same document always gives the same bytes.
func (d *Document) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode thread %s: %w", d.Thread.ID, err)
	}
	return append(b, '\n'), nil
}
