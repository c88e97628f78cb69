package thread

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
)

// ImportThread is one whole thread to write at once (an import): its row,
// its checkpoints in Seq order (parents first, Seq from 1 up), the runs
// that wrote them (ended runs only) and its head.
type ImportThread struct {
	Thread Thread
	Nodes  []checkpoint.Node
	Runs   []Run
	Head   uuid.UUID // a leaf of Nodes, or uuid.Nil for an empty thread
	// Files are attachments whose bytes the file carried (an export made
	// with attachments inline): stored for the importing caller unless it
	// has them already.
	Files []File
}

// Imported is what an import wrote of one thread.
type Imported struct {
	ThreadID uuid.UUID
	Title    *string
	Messages int
}

// ThreadExport is a whole thread as an export reads it.
type ThreadExport struct {
	Thread *Thread
	Nodes  []checkpoint.Node
	Runs   []*Run
}

// ThreadRef names one thread and its owner (a listing for the export of
// many threads).
type ThreadRef struct {
	Caller string
	ID     uuid.UUID
}

// TransferStore reads and writes whole threads: the export and import of
// threads. *store.Store is one.
type TransferStore interface {
	// ThreadExport returns the caller's thread with every checkpoint in
	// Seq order and every run in start order; not_found for an unknown or
	// foreign thread.
	ThreadExport(ctx context.Context, caller string, id uuid.UUID) (*ThreadExport, error)
	// ThreadImport writes every thread next yields (until it returns
	// io.EOF) for caller in one transaction: all or nothing. A thread
	// whose id, or one of whose run ids, exists already (for any caller)
	// is written under new ids throughout. An error of next, or a refused
	// row (invalid_request, invalid_fork), writes nothing.
	ThreadImport(ctx context.Context, caller string, next func() (*ImportThread, error)) ([]Imported, error)
}

// Renew gives the thread, its messages and its runs new ids, keeping
// every reference between them: an import whose ids are taken.
func (it *ImportThread) Renew() {
	ids := make(map[uuid.UUID]uuid.UUID, len(it.Nodes))
	re := func(id uuid.UUID) uuid.UUID {
		if id == uuid.Nil {
			return id
		}
		n, ok := ids[id]
		if !ok {
			n = uuid.New()
			ids[id] = n
		}
		return n
	}
	it.Thread.ID = uuid.New()
	for i := range it.Nodes {
		n := &it.Nodes[i]
		n.ID, n.ParentID, n.RunID, n.ThreadID = re(n.ID), re(n.ParentID), re(n.RunID), it.Thread.ID
	}
	for i := range it.Runs {
		r := &it.Runs[i]
		r.ID, r.ThreadID = re(r.ID), it.Thread.ID
		r.MessageID, r.ParentID, r.UserMessageID = re(r.MessageID), re(r.ParentID), re(r.UserMessageID)
	}
	it.Head = re(it.Head)
}

// RenameAttachment makes the thread's messages name attachment to instead
// of from: in their attachments and in their parts' URLs. An import whose
// attachment id is another caller's stores the bytes under a new id.
func (it *ImportThread) RenameAttachment(from, to uuid.UUID) {
	f, t := from.String(), to.String()
	re := func(s string) string { return strings.ReplaceAll(s, f, t) }
	parts := func(ps []checkpoint.Part) {
		for i := range ps {
			p := &ps[i]
			p.Image = re(p.Image)
			if p.Type == checkpoint.PartFile && len(p.Data) > 0 {
				p.Data = json.RawMessage(re(string(p.Data)))
			}
		}
	}
	for i := range it.Nodes {
		n := &it.Nodes[i]
		n.Content = append([]checkpoint.Part(nil), n.Content...)
		parts(n.Content)
		n.Attachments = append([]checkpoint.Attachment(nil), n.Attachments...)
		for j := range n.Attachments {
			a := &n.Attachments[j]
			a.ID, a.URL = re(a.ID), re(a.URL)
			a.Content = append([]checkpoint.Part(nil), a.Content...)
			parts(a.Content)
		}
	}
	for i := range it.Files {
		if it.Files[i].ID == from {
			it.Files[i].ID = to
		}
	}
}
