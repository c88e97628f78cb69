package thread

import (
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
)

// Share is a read-only link to one message's branch: the path from the
// root to CheckpointID, the newest checkpoint of MessageID when it was
// shared. Checkpoints are immutable, so the path it shows never changes.
type Share struct {
	ID           uuid.UUID
	ThreadID     uuid.UUID
	MessageID    uuid.UUID
	CheckpointID uuid.UUID
	Caller       string // the owner: the thread's caller
	CreatedAt    time.Time
	ExpiresAt    *time.Time // nil: never
	// Title is the thread's title (read with the share, not stored).
	Title *string
}

// ShareFork is what continuing a shared path writes: a new thread of the
// viewer's, its checkpoints (copies of the path, root first, with new
// ids), and the attachments they name, copied from Owner to the new
// thread's caller (old id to new id).
type ShareFork struct {
	Thread      *Thread
	Nodes       []checkpoint.Node
	Owner       string
	Attachments map[uuid.UUID]uuid.UUID
}

// SharePath returns the shared path of tree, up to and including
// checkpointID, as the client renders messages: a tree of the path alone
// is exported, so nothing off the path (siblings, later messages, later
// continuations of the shared turn) can show. Run ids are left out (they
// name nothing a viewer may read), and attachment URLs point at the
// share's own attachment route. It returns nil when checkpointID is not in
// tree.
func SharePath(tree *checkpoint.Tree, checkpointID, shareID uuid.UUID) []checkpoint.Message {
	nodes := tree.Path(checkpointID)
	if nodes == nil {
		return nil
	}
	sub, err := checkpoint.NewTree(nodes)
	if err != nil {
		return nil
	}
	path, _ := sub.Export(checkpointID)
	for i := range path {
		m := &path[i]
		m.Metadata.RunID, m.Metadata.Custom.RunID = nil, nil
		if m.Attachments != nil {
			atts := make([]checkpoint.Attachment, len(*m.Attachments))
			for j, a := range *m.Attachments {
				atts[j] = shareAttachment(a, shareID)
			}
			m.Attachments = &atts
		}
	}
	return path
}

// attachmentPrefix is the URL path attachments are stored with: a
// checkpoint's attachments and image parts keep it, so it is part of the
// stored data, and the API serves it (api.go's route table).
const attachmentPrefix = "/api/v1/attachments/"

// AttachmentURL is where the owner reads an uploaded attachment.
func AttachmentURL(id uuid.UUID) string { return attachmentPrefix + id.String() }

// ShareAttachmentURL is where a share's viewer reads an attachment of the
// shared path.
func ShareAttachmentURL(shareID uuid.UUID, id string) string {
	return "/api/v1/shares/" + shareID.String() + "/attachments/" + id
}

func shareAttachment(a checkpoint.Attachment, shareID uuid.UUID) checkpoint.Attachment {
	url := ShareAttachmentURL(shareID, a.ID)
	a.Content = rewriteImages(a.Content, attachmentPrefix+a.ID, url)
	if a.URL != "" {
		a.URL = url
	}
	return a
}

// rewriteImages returns parts with image parts naming from named to.
func rewriteImages(parts []checkpoint.Part, from, to string) []checkpoint.Part {
	out := make([]checkpoint.Part, len(parts))
	copy(out, parts)
	for i := range out {
		if out[i].Type == "image" && out[i].Image == from {
			out[i].Image = to
		}
	}
	return out
}

// PathAttachments returns the ids of the attachments the path up to
// checkpointID names (attachments of its user messages).
func PathAttachments(tree *checkpoint.Tree, checkpointID uuid.UUID) map[uuid.UUID]bool {
	ids := map[uuid.UUID]bool{}
	for _, n := range tree.PathRefs(checkpointID) {
		for _, a := range n.Attachments {
			if id, err := uuid.Parse(a.ID); err == nil {
				ids[id] = true
			}
		}
	}
	return ids
}

// ForkPath copies the path up to checkpointID into new checkpoints for
// the thread th: new ids, parents mapped, attachments given new ids (the
// returned map, old to new) and their URLs. Runs are not copied, so run
// ids are cleared. It returns nil when checkpointID is not in tree.
func ForkPath(tree *checkpoint.Tree, checkpointID uuid.UUID, th uuid.UUID) ([]checkpoint.Node, map[uuid.UUID]uuid.UUID) {
	refs := tree.PathRefs(checkpointID)
	if refs == nil {
		return nil, nil
	}
	ids := make(map[uuid.UUID]uuid.UUID, len(refs))
	atts := map[uuid.UUID]uuid.UUID{}
	out := make([]checkpoint.Node, len(refs))
	for i, n := range refs {
		c := *n
		c.ID, c.ThreadID, c.RunID, c.Seq = uuid.New(), th, uuid.Nil, int64(i+1)
		ids[n.ID] = c.ID
		c.ParentID = ids[n.ParentID] // uuid.Nil for the root
		c.Attachments = forkAttachments(n.Attachments, atts)
		out[i] = c
	}
	return out, atts
}

func forkAttachments(in []checkpoint.Attachment, atts map[uuid.UUID]uuid.UUID) []checkpoint.Attachment {
	if in == nil {
		return nil
	}
	out := make([]checkpoint.Attachment, len(in))
	for j, a := range in {
		old, err := uuid.Parse(a.ID)
		if err != nil {
			out[j] = a
			continue
		}
		nid, ok := atts[old]
		if !ok {
			nid = uuid.New()
			atts[old] = nid
		}
		url := attachmentPrefix + nid.String()
		a.Content = rewriteImages(a.Content, attachmentPrefix+a.ID, url)
		if strings.HasPrefix(a.URL, attachmentPrefix) {
			a.URL = url
		}
		a.ID = nid.String()
		out[j] = a
	}
	return out
}
