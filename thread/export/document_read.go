package export

import (
	"encoding/json"
	"strconv"

	"github.com/google/uuid"
	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// fromDocument reads a Threadline document back: every id, time and part
// as exported, so that exporting the import gives the same bytes. A run
// the export caught running comes back interrupted.
func fromDocument(raw json.RawMessage, where string) (*thread.ImportThread, error) {
	var d Document
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, invalid(where, "%s", jsonErr(err))
	}
	if d.Format != Format {
		return nil, invalid(where, "format %s is not %s", strconv.Quote(d.Format), strconv.Quote(Format))
	}
	if d.Version != Version {
		return nil, invalid(where, "version %d of %s is not supported; this service reads version %d", d.Version, Format, Version)
	}
	if d.Thread.ID == uuid.Nil {
		return nil, invalid(where, "thread.thread_id is missing")
	}
	md := d.Thread.Metadata
	if len(md) == 0 || string(md) == "null" {
		md = json.RawMessage(`{}`)
	}
	it := &thread.ImportThread{Thread: thread.Thread{ID: d.Thread.ID, Title: d.Thread.Title, Metadata: md,
		CreatedAt: d.Thread.CreatedAt.UTC(), UpdatedAt: d.Thread.UpdatedAt.UTC()}}
	if it.Thread.Title != nil {
		if err := noNUL(*it.Thread.Title, where+".thread.title"); err != nil {
			return nil, err
		}
	}
	var last int64
	for i := range d.Checkpoints {
		n, err := docNode(&d.Checkpoints[i], where+".checkpoints["+strconv.Itoa(i)+"]", last, it)
		if err != nil {
			return nil, err
		}
		last = n.Seq
		it.Nodes = append(it.Nodes, n)
	}
	it.Thread.LastSeq = last
	if d.Head != nil {
		it.Head = *d.Head
	}
	ids := make(map[uuid.UUID]bool, len(it.Nodes))
	for _, n := range it.Nodes {
		ids[n.ID] = true
	}
	if it.Head != uuid.Nil && !ids[it.Head] {
		return nil, invalid(where, "head %s is not a checkpoint of the thread", it.Head)
	}
	runs, err := docRuns(d.Runs, ids, where)
	if err != nil {
		return nil, err
	}
	it.Runs = runs
	return it, nil
}

// docNode reads one checkpoint of a document; its inline attachments
// join it.Files.
func docNode(c *Checkpoint, cw string, last int64, it *thread.ImportThread) (checkpoint.Node, error) {
	var n checkpoint.Node
	if c.ID == uuid.Nil {
		return n, invalid(cw, "id is missing")
	}
	if c.Role != checkpoint.RoleUser && c.Role != checkpoint.RoleAssistant && c.Role != checkpoint.RoleSystem {
		return n, invalid(cw, "role %s is not user, assistant or system", strconv.Quote(string(c.Role)))
	}
	if c.Seq <= last {
		return n, invalid(cw, "seq %d does not follow %d: checkpoints are listed in seq order", c.Seq, last)
	}
	n = checkpoint.Node{ID: c.ID, ThreadID: it.Thread.ID, Seq: c.Seq, Role: c.Role, Content: c.Content, Status: c.Status, CreatedAt: c.CreatedAt.UTC()}
	if c.ParentID != nil {
		n.ParentID = *c.ParentID
	}
	if c.RunID != nil {
		n.RunID = *c.RunID
	}
	for i := range c.Attachments {
		a := &c.Attachments[i]
		n.Attachments = append(n.Attachments, a.Attachment)
		if a.Data == nil {
			continue
		}
		f, err := inlineFile(a, cw, it.Files)
		if err != nil {
			return n, err
		}
		if f != nil {
			it.Files = append(it.Files, *f)
		}
	}
	return n, nil
}

func docRuns(in []DocRun, ids map[uuid.UUID]bool, where string) ([]thread.Run, error) {
	seen := map[uuid.UUID]bool{}
	out := make([]thread.Run, 0, len(in))
	for i, r := range in {
		rw := where + ".runs[" + strconv.Itoa(i) + "]"
		if r.ID == uuid.Nil || seen[r.ID] {
			return nil, invalid(rw, "run_id is missing or repeats")
		}
		seen[r.ID] = true
		if !ids[r.MessageID] || !ids[r.ParentID] {
			return nil, invalid(rw, "message_id and parent_message_id must be checkpoints of the thread")
		}
		run := thread.Run{ID: r.ID, Status: r.Status, ParentID: r.ParentID, MessageID: r.MessageID, Model: r.Model,
			Config: r.Config.Domain(), Usage: domainUsage(r.Usage), Error: domainRunError(r.Error), CreatedAt: r.StartedAt.UTC()}
		if r.UserMessageID != nil {
			if !ids[*r.UserMessageID] {
				return nil, invalid(rw, "user_message_id %s is not a checkpoint of the thread", *r.UserMessageID)
			}
			run.UserMessageID = *r.UserMessageID
		}
		switch r.Status {
		case thread.RunSucceeded, thread.RunFailed, thread.RunCancelled, thread.RunInterrupted, thread.RunRequiresAction:
		case thread.RunRunning:
			run.Status = thread.RunInterrupted
		default:
			return nil, invalid(rw, "status %s is not a run status", strconv.Quote(string(r.Status)))
		}
		if r.EndedAt != nil {
			e := r.EndedAt.UTC()
			run.FinishedAt = &e
		}
		out = append(out, run)
	}
	return out, nil
}

// inlineFile is an attachment whose bytes the document carries, or nil
// when files holds it already.
func inlineFile(a *Attachment, where string, files []thread.File) (*thread.File, error) {
	id, err := uuid.Parse(a.ID)
	if err != nil {
		return nil, invalid(where, "attachment id %s is not a UUID", strconv.Quote(a.ID))
	}
	for _, f := range files {
		if f.ID == id {
			return nil, nil
		}
	}
	if err := noNUL(a.Name, where+".attachments.name"); err != nil {
		return nil, err
	}
	if err := noNUL(a.ContentType, where+".attachments.contentType"); err != nil {
		return nil, err
	}
	return &thread.File{ID: id, Name: a.Name, ContentType: a.ContentType, Size: int64(len(a.Data)), Data: a.Data}, nil
}

func domainUsage(u *wire.Usage) *thread.Usage {
	if u == nil {
		return nil
	}
	d := thread.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	return &d
}

func domainRunError(e *wire.RunError) *thread.RunError {
	if e == nil {
		return nil
	}
	d := thread.RunError(*e)
	return &d
}
