// Package checkpoint owns the conversation tree: immutable message nodes with
// parent pointers, the path from the root to a node, fork-point resolution for
// new, edited and regenerated messages, head resolution, and the export to
// assistant-ui's ExportedMessageRepository shape.
//
// It is pure Go: no database, no HTTP. A Tree is an append-only list of nodes
// ordered by their per-thread sequence, so a parent always precedes its
// children and siblings appear in creation order.
package checkpoint

import (
	"bytes"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint/errcode"
)

// Role is who wrote a message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system"
)

// Part is one content part of a message, in assistant-ui's shape. Which
// fields a part has depends on its type:
//   - text, reasoning: Text
//   - image: Image (a URL)
//   - tool-call: ToolCallID, ToolName, Args (a JSON object), ArgsText (the
//     arguments as the model wrote them), and once the tool answered Result
//     (a JSON value) and IsError
//   - data: Name and Data (a JSON value)
//   - source: SourceType, ID, URL, Title
//   - file: Filename, MimeType, and Data (a JSON string: the file's URL)
type Part struct {
	Type  string
	Text  string
	Image string

	ToolCallID string
	ToolName   string
	Args       json.RawMessage
	ArgsText   string
	Result     json.RawMessage
	IsError    bool

	Name string
	Data json.RawMessage

	SourceType string
	ID         string
	URL        string
	Title      string

	Filename string
	MimeType string

	// Subagent, on a delegate tool-call part, names the child thread and
	// run the call started, once it started.
	Subagent *SubagentRef
}

// SubagentRef names a sub-agent's thread and run.
type SubagentRef struct {
	ThreadID uuid.UUID
	RunID    uuid.UUID
}

// Part types.
const (
	PartText      = "text"
	PartImage     = "image"
	PartReasoning = "reasoning"
	PartToolCall  = "tool-call"
	PartData      = "data"
	PartSource    = "source"
	PartFile      = "file"
)

// ArgsObject returns argsText as the args of a tool-call part: the text
// compacted when it is a JSON object, else {} (arguments still streaming,
// or a model that wrote something else).
func ArgsObject(argsText string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(argsText), &m) != nil || m == nil {
		return json.RawMessage(`{}`)
	}
	var b bytes.Buffer
	if json.Compact(&b, []byte(argsText)) != nil {
		return json.RawMessage(`{}`)
	}
	return b.Bytes()
}

// Compacted returns parts with their JSON values (args, result, data)
// compacted, as they were written before a database printed them with
// spaces. The slice is parts itself when nothing needed it.
func Compacted(parts []Part) []Part {
	out, copied := parts, false
	for i := range parts {
		p := &parts[i]
		if p.Args == nil && p.Result == nil && p.Data == nil {
			continue
		}
		if !copied {
			out, copied = append([]Part(nil), parts...), true
		}
		out[i].Args, out[i].Result, out[i].Data = compact(p.Args), compact(p.Result), compact(p.Data)
	}
	return out
}

func compact(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// Status is an assistant message's status, in assistant-ui's shape.
type Status struct {
	Type   string // running | complete | incomplete
	Reason string // stop | cancelled | error | length | other
	Error  string
}

// Attachment is a file attached to a user message, in assistant-ui's
// CompleteAttachment shape.
type Attachment struct {
	ID          string
	Type        string // image | document | file
	Name        string
	ContentType string
	Size        int64
	URL         string
	Content     []Part
	Status      struct {
		Type string
	}
}

// Node is one immutable checkpoint: a message with its parent pointer. The
// message id is the checkpoint id.
type Node struct {
	ID          uuid.UUID
	ThreadID    uuid.UUID
	ParentID    uuid.UUID // uuid.Nil for a root message
	Seq         int64     // per-thread position: parents precede children
	Role        Role
	Content     []Part
	Status      *Status // assistant only
	Attachments []Attachment
	RunID       uuid.UUID // uuid.Nil when no run wrote it
	CreatedAt   time.Time
	// Running marks the in-flight assistant message of an active run; it is
	// not a checkpoint yet.
	Running bool
}

// Text returns the concatenated text parts of the node.
func (n *Node) Text() string {
	var s string
	for _, p := range n.Content {
		if p.Type == "text" {
			s += p.Text
		}
	}
	return s
}

// Tree is an immutable, append-only view of a thread's checkpoints ordered by
// Seq. Appending returns a new Tree and never changes an existing one, so a
// Tree can be shared between goroutines.
//
// Appending to the newest tree of a lineage costs only the new nodes: the
// trees share one backing array, of which each sees a prefix, and one index
// whose positions past a tree's length it ignores. Appending to an older tree
// (a second branch of versions) copies it once.
type Tree struct {
	nodes []Node
	par   []int32 // par[i] is the position of nodes[i]'s parent, -1 for a root
	sh    *treeStore
}

// treeStore is what a lineage of trees shares.
type treeStore struct {
	mu    sync.Mutex
	n     int      // the longest tree's length: only it may append in place
	index sync.Map // uuid.UUID -> int position; written once per id
}

// NewTree builds a tree from nodes ordered by Seq.
//
// It returns an invalid_request error if a node's parent is missing or does
// not precede it, or if an id repeats.
func NewTree(nodes []Node) (*Tree, error) {
	return (&Tree{}).Append(nodes...)
}

func (t *Tree) pos(id uuid.UUID) (int, bool) {
	if t.sh == nil {
		return 0, false
	}
	v, ok := t.sh.index.Load(id)
	if !ok {
		return 0, false
	}
	i := v.(int)
	return i, i < len(t.nodes)
}

// Append returns a new tree with nodes added after the existing ones.
//
// It returns an invalid_request error if a parent is unknown or an id repeats.
func (t *Tree) Append(nodes ...Node) (*Tree, error) {
	if len(nodes) == 0 {
		return t, nil
	}
	var batch map[uuid.UUID]int // position of each new node
	if len(nodes) > 1 {
		batch = make(map[uuid.UUID]int, len(nodes))
	}
	par := make([]int32, len(nodes))
	for i, nd := range nodes {
		if _, dup := t.pos(nd.ID); dup {
			return nil, errcode.New(errcode.Invalid, "message %s appears twice", nd.ID)
		}
		if _, dup := batch[nd.ID]; dup {
			return nil, errcode.New(errcode.Invalid, "message %s appears twice", nd.ID)
		}
		par[i] = -1
		if nd.ParentID != uuid.Nil {
			p, ok := t.pos(nd.ParentID)
			if !ok {
				p, ok = batch[nd.ParentID]
			}
			if !ok {
				return nil, errcode.New(errcode.Invalid, "message %s: parent %s is not in the tree before it", nd.ID, nd.ParentID)
			}
			par[i] = int32(p)
		}
		if batch != nil {
			batch[nd.ID] = len(t.nodes) + i
		}
	}
	if sh := t.sh; sh != nil {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		if sh.n == len(t.nodes) {
			// The newest tree: no other tree sees past its end, so the
			// shared arrays and index can grow in place.
			all := append(t.nodes, nodes...)
			for i := len(t.nodes); i < len(all); i++ {
				sh.index.Store(all[i].ID, i)
			}
			sh.n = len(all)
			return &Tree{nodes: all, par: append(t.par, par...), sh: sh}, nil
		}
	}
	sh := &treeStore{}
	extra := len(nodes) + len(t.nodes)/4 + 8
	all := append(append(make([]Node, 0, len(t.nodes)+extra), t.nodes...), nodes...)
	for i := range all {
		sh.index.Store(all[i].ID, i)
	}
	sh.n = len(all)
	return &Tree{nodes: all, par: append(append(make([]int32, 0, len(t.nodes)+extra), t.par...), par...), sh: sh}, nil
}

// Len returns the number of nodes.
func (t *Tree) Len() int { return len(t.nodes) }

// Nodes returns the nodes in order. The slice must not be modified.
func (t *Tree) Nodes() []Node { return t.nodes[:len(t.nodes):len(t.nodes)] }

// LastSeq returns the Seq of the newest node, or 0 for an empty tree.
func (t *Tree) LastSeq() int64 {
	if len(t.nodes) == 0 {
		return 0
	}
	return t.nodes[len(t.nodes)-1].Seq
}

// Get returns the node with id, or nil.
func (t *Tree) Get(id uuid.UUID) *Node {
	i, ok := t.pos(id)
	if !ok {
		return nil
	}
	return &t.nodes[i]
}

// Upto returns the tree as it was when its newest node had Seq <= seq.
func (t *Tree) Upto(seq int64) *Tree {
	k := len(t.nodes)
	for k > 0 && t.nodes[k-1].Seq > seq {
		k--
	}
	if k == len(t.nodes) {
		return t
	}
	return &Tree{nodes: t.nodes[:k], par: t.par[:k], sh: t.sh}
}

// Path returns the nodes from the root to id, root first, or nil if id is
// not in the tree.
func (t *Tree) Path(id uuid.UUID) []Node {
	refs := t.PathRefs(id)
	if refs == nil {
		return nil
	}
	out := make([]Node, len(refs))
	for i, n := range refs {
		out[i] = *n
	}
	return out
}

// PathRefs is Path without copying: the nodes are the tree's own and must
// not be modified.
func (t *Tree) PathRefs(id uuid.UUID) []*Node {
	i, ok := t.pos(id)
	if !ok {
		return nil
	}
	depth := 0
	for j := int32(i); j >= 0; j = t.par[j] {
		depth++
	}
	out := make([]*Node, depth)
	for j := int32(i); j >= 0; j = t.par[j] {
		depth--
		out[depth] = &t.nodes[j]
	}
	return out
}

// Children returns the children of id (uuid.Nil for the roots) in creation order.
func (t *Tree) Children(id uuid.UUID) []Node {
	var out []Node
	for _, n := range t.nodes {
		if n.ParentID == id {
			out = append(out, n)
		}
	}
	return out
}

// ResolveHead returns the leaf a head id stands for: the id itself when it is
// a leaf, else the most recently created leaf below it. A zero or unknown id
// resolves to the most recently created leaf of the whole tree. It returns
// uuid.Nil only for an empty tree.
func (t *Tree) ResolveHead(id uuid.UUID) uuid.UUID {
	if len(t.nodes) == 0 {
		return uuid.Nil
	}
	hasChild := make([]bool, len(t.nodes))
	for _, n := range t.nodes {
		if n.ParentID != uuid.Nil {
			p, _ := t.pos(n.ParentID)
			hasChild[p] = true
		}
	}
	start, ok := t.pos(id)
	if !ok {
		for i := len(t.nodes) - 1; i >= 0; i-- {
			if !hasChild[i] {
				return t.nodes[i].ID
			}
		}
	}
	if !hasChild[start] {
		return id
	}
	// Descendants have a larger index than their ancestor; scan newest first.
	for i := len(t.nodes) - 1; i > start; i-- {
		if hasChild[i] {
			continue
		}
		for cur := i; ; {
			p := t.nodes[cur].ParentID
			if p == uuid.Nil {
				break
			}
			cur, _ = t.pos(p)
			if cur == start {
				return t.nodes[i].ID
			}
			if cur < start {
				break
			}
		}
	}
	return id
}

// ForkRequest is what a run asks to append, in API.md's terms.
type ForkRequest struct {
	HasMessage bool      // a new user message is part of the run
	ParentID   uuid.UUID // parent_message_id; uuid.Nil for null
	SourceID   uuid.UUID // source_message_id; uuid.Nil for null
}

// Fork is a resolved fork point.
type Fork struct {
	// UserParent is where the new user message goes (uuid.Nil for a root);
	// meaningful only when the request has a message.
	UserParent uuid.UUID
	// AssistantParent is the user message the new reply answers, for a
	// regenerate. For a run with a message it is the new user message.
	AssistantParent uuid.UUID
}

// ResolveFork checks a run request against the tree and returns where the
// new nodes go. Every rule of API.md's invalid_fork row returns an
// invalid_fork error whose message names the rule:
//   - the parent is not in this thread;
//   - an edit's source is not a user message;
//   - the source is not a child of the parent;
//   - a regenerate names no user message as parent (or sits under an assistant message).
func (t *Tree) ResolveFork(r ForkRequest) (Fork, error) {
	var parent *Node
	if r.ParentID != uuid.Nil {
		if parent = t.Get(r.ParentID); parent == nil {
			return Fork{}, errcode.New(errcode.InvalidFork, "parent_message_id %s is not a message of this thread", r.ParentID)
		}
	}
	var source *Node
	if r.SourceID != uuid.Nil {
		if source = t.Get(r.SourceID); source == nil {
			return Fork{}, errcode.New(errcode.InvalidFork, "source_message_id %s is not a message of this thread", r.SourceID)
		}
		if source.ParentID != r.ParentID {
			return Fork{}, errcode.New(errcode.InvalidFork, "source_message_id %s is not a child of parent_message_id %s", r.SourceID, nilString(r.ParentID))
		}
	}
	if r.HasMessage {
		if source != nil && source.Role != RoleUser {
			return Fork{}, errcode.New(errcode.InvalidFork, "only user messages can be edited; %s is a %s message", source.ID, source.Role)
		}
		return Fork{UserParent: r.ParentID}, nil
	}
	// Regenerate.
	if parent == nil {
		return Fork{}, errcode.New(errcode.InvalidFork, "regenerate needs parent_message_id: the user message above the reply")
	}
	if parent.Role != RoleUser {
		return Fork{}, errcode.New(errcode.InvalidFork, "regenerate under a %s message: parent_message_id must be a user message", parent.Role)
	}
	if source != nil && source.Role != RoleAssistant {
		return Fork{}, errcode.New(errcode.InvalidFork, "regenerate replaces an assistant message; %s is a %s message", source.ID, source.Role)
	}
	return Fork{AssistantParent: r.ParentID}, nil
}

func nilString(id uuid.UUID) string {
	if id == uuid.Nil {
		return "null"
	}
	return id.String()
}

// Message is a node in assistant-ui's ThreadMessage wire shape.
type Message struct {
	ID          uuid.UUID
	Role        Role
	Content     []Part
	CreatedAt   time.Time
	Status      *Status
	Attachments *[]Attachment
	Metadata    Metadata
}

// Metadata is the message metadata; RunID duplicates custom.runId because
// assistant-ui reads metadata.runId itself.
type Metadata struct {
	RunID  *uuid.UUID
	Custom Custom
}

// Custom holds Threadline's own message metadata.
type Custom struct {
	CheckpointID       *uuid.UUID
	ParentCheckpointID *uuid.UUID
	RunID              *uuid.UUID
}

// RepositoryItem is one entry of ExportedMessageRepository.messages.
type RepositoryItem struct {
	Message  Message
	ParentID *uuid.UUID
}

// Repository is assistant-ui's ExportedMessageRepository.
type Repository struct {
	HeadID   *uuid.UUID
	Messages []RepositoryItem
}

// WireMessage converts a node to the wire shape.
func WireMessage(n *Node) Message {
	m := Message{ID: n.ID, Role: n.Role, Content: n.Content, CreatedAt: n.CreatedAt.UTC(), Status: n.Status}
	if m.Content == nil {
		m.Content = []Part{}
	}
	if n.Role == RoleUser {
		a := n.Attachments
		if a == nil {
			a = []Attachment{}
		}
		m.Attachments = &a
	}
	if !n.Running {
		id := n.ID
		m.Metadata.Custom.CheckpointID = &id
	}
	if n.ParentID != uuid.Nil {
		p := n.ParentID
		m.Metadata.Custom.ParentCheckpointID = &p
	}
	if n.RunID != uuid.Nil {
		r := n.RunID
		m.Metadata.Custom.RunID = &r
		m.Metadata.RunID = &r
	}
	return m
}

// Agent turns that waited for a person (a client tool's result, an
// approval) are continued by appending: the continuation is an assistant
// checkpoint under the waiting one, holding the whole turn so far. A chain
// of assistant checkpoints is one message on the wire: its first
// checkpoint's id (the turn's id, which its runs stream into), its last
// checkpoint's content, status and checkpointId.

// continues reports whether node i continues its parent's turn.
func (t *Tree) continues(i int) bool {
	p := t.par[i]
	return p >= 0 && t.nodes[i].Role == RoleAssistant && t.nodes[p].Role == RoleAssistant
}

// turnRoot returns the position of the first checkpoint of i's turn.
func (t *Tree) turnRoot(i int) int {
	for t.continues(i) {
		i = int(t.par[i])
	}
	return i
}

// WireID returns the message id the client knows checkpoint id by: the
// turn's id for a continuation, else id itself.
func (t *Tree) WireID(id uuid.UUID) uuid.UUID {
	i, ok := t.pos(id)
	if !ok {
		return id
	}
	return t.nodes[t.turnRoot(i)].ID
}

// TurnTip returns the newest checkpoint of the turn whose message id is
// id: the end of its chain of continuations (the node itself when it was
// never continued), or nil when id is not in the tree.
func (t *Tree) TurnTip(id uuid.UUID) *Node {
	i, ok := t.pos(id)
	if !ok {
		return nil
	}
	for {
		next := -1
		for j := i + 1; j < len(t.nodes); j++ {
			if int(t.par[j]) == i && t.continues(j) {
				next = j
				break
			}
		}
		if next < 0 {
			return &t.nodes[i]
		}
		i = next
	}
}

// tips maps each turn's first checkpoint to its last, or nil when no turn
// of the tree was continued.
func (t *Tree) tips() map[int]int {
	var tips map[int]int
	for j := range t.nodes {
		if t.continues(j) {
			if tips == nil {
				tips = map[int]int{}
			}
			tips[t.turnRoot(j)] = j // later continuations come later
		}
	}
	return tips
}

// wireMessage is node i as the client sees it: a turn's first checkpoint
// shows its last one under the first one's id.
func (t *Tree) wireMessage(i int, tips map[int]int) Message {
	tip, ok := tips[i]
	if !ok {
		return WireMessage(&t.nodes[i])
	}
	m := WireMessage(&t.nodes[tip])
	m.ID, m.CreatedAt = t.nodes[i].ID, t.nodes[i].CreatedAt.UTC()
	return m
}

// CollapseTurns returns path with each turn's checkpoints but its last
// left out: what the model and the client see of a path.
func CollapseTurns(path []*Node) []*Node {
	out := path[:0:0]
	for k, n := range path {
		if n.Role == RoleAssistant && k+1 < len(path) && path[k+1].Role == RoleAssistant {
			continue
		}
		out = append(out, n)
	}
	return out
}

// Export returns the path from the root to the resolved head and the whole
// tree as an ExportedMessageRepository: parents before children, siblings in
// creation order, headId a leaf (null only for an empty tree). A continued
// agent turn is one message (see TurnTip).
func (t *Tree) Export(head uuid.UUID) (path []Message, repo Repository) {
	tips := t.tips()
	repo.Messages = make([]RepositoryItem, 0, len(t.nodes))
	for i := range t.nodes {
		if tips != nil && t.continues(i) {
			continue
		}
		item := RepositoryItem{Message: t.wireMessage(i, tips)}
		if p := t.par[i]; p >= 0 {
			pid := t.nodes[t.turnRoot(int(p))].ID
			item.ParentID = &pid
		}
		repo.Messages = append(repo.Messages, item)
	}
	path = []Message{}
	h := t.ResolveHead(head)
	if h == uuid.Nil {
		return path, repo
	}
	refs := t.PathRefs(h)
	if tips != nil {
		refs = CollapseTurns(refs)
		h = t.WireID(h)
	}
	repo.HeadID = &h
	for _, n := range refs {
		if tips == nil {
			path = append(path, WireMessage(n))
			continue
		}
		i, _ := t.pos(n.ID)
		path = append(path, t.wireMessage(t.turnRoot(i), tips))
	}
	return path, repo
}

// PartsEqual reports whether a and b are the same content: part by part
// the same type and the same fields of that type (those its stored shape
// holds; a JSON value's bytes as they are).
func PartsEqual(a, b []Part) bool {
	return slices.EqualFunc(a, b, func(x, y Part) bool { return x.Type == y.Type && sameFields(&x, &y) })
}

func sameFields(x, y *Part) bool {
	switch x.Type {
	case PartText, PartReasoning:
		return x.Text == y.Text
	case PartImage:
		return x.Image == y.Image
	case PartToolCall:
		return sameToolCall(x, y)
	case PartData:
		return x.Name == y.Name && sameJSON(x.Data, y.Data, "null")
	case PartSource:
		return x.SourceType == y.SourceType && x.ID == y.ID && x.URL == y.URL && x.Title == y.Title
	case PartFile:
		return x.Filename == y.Filename && x.MimeType == y.MimeType && sameJSON(x.Data, y.Data, "null")
	}
	return allFieldsEqual(x, y)
}

func sameToolCall(x, y *Part) bool {
	return x.ToolCallID == y.ToolCallID && x.ToolName == y.ToolName && x.ArgsText == y.ArgsText &&
		sameJSON(x.Args, y.Args, "{}") && bytes.Equal(x.Result, y.Result) && (x.Result == nil || x.IsError == y.IsError)
}

// allFieldsEqual compares a part of a type this package does not know.
func allFieldsEqual(x, y *Part) bool {
	return x.Text == y.Text && x.Image == y.Image && x.ToolCallID == y.ToolCallID && x.ToolName == y.ToolName &&
		x.ArgsText == y.ArgsText && x.IsError == y.IsError && x.Name == y.Name && otherFieldsEqual(x, y)
}

func otherFieldsEqual(x, y *Part) bool {
	return x.SourceType == y.SourceType && x.ID == y.ID && x.URL == y.URL && x.Title == y.Title && x.Filename == y.Filename &&
		x.MimeType == y.MimeType && bytes.Equal(x.Args, y.Args) && bytes.Equal(x.Result, y.Result) && bytes.Equal(x.Data, y.Data)
}

// sameJSON compares two JSON values, an empty one standing for empty.
func sameJSON(x, y json.RawMessage, empty string) bool {
	if len(x) == 0 {
		x = json.RawMessage(empty)
	}
	if len(y) == 0 {
		y = json.RawMessage(empty)
	}
	return bytes.Equal(x, y)
}
