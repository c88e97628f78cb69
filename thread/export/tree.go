package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// srcNode is one node of another product's message tree, by its key in
// the file.
type srcNode struct {
	key      string
	parent   string // "" for a root
	children []string
	time     float64
	where    string // its place in the file, for errors
}

// order returns the nodes parents first, each node's children in the
// order its children list gives (then by time and key), roots by time and
// key. It is iterative, so a chain of any depth is fine. A parent that is
// not a node, or a parent chain that loops, is an invalid_request error
// naming the node.
func order(nodes map[string]*srcNode) ([]*srcNode, error) {
	keys := make([]string, 0, len(nodes))
	for k := range nodes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kids := map[string][]*srcNode{}
	var roots []*srcNode
	for _, k := range keys {
		n := nodes[k]
		if n.parent == "" {
			roots = append(roots, n)
			continue
		}
		if _, ok := nodes[n.parent]; !ok {
			return nil, invalid(n.where, "parent %s not found", strconv.Quote(n.parent))
		}
		kids[n.parent] = append(kids[n.parent], n)
	}
	byTime := func(ns []*srcNode, pos map[string]int) {
		sort.SliceStable(ns, func(i, j int) bool {
			pi, oki := pos[ns[i].key]
			pj, okj := pos[ns[j].key]
			switch {
			case oki && okj && pi != pj:
				return pi < pj
			case oki != okj:
				return oki
			case ns[i].time != ns[j].time:
				return ns[i].time < ns[j].time
			}
			return ns[i].key < ns[j].key
		})
	}
	byTime(roots, nil)
	out := make([]*srcNode, 0, len(nodes))
	stack := make([]*srcNode, 0, len(roots))
	for i := len(roots) - 1; i >= 0; i-- {
		stack = append(stack, roots[i])
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		out = append(out, n)
		cs := kids[n.key]
		if len(cs) > 1 {
			pos := make(map[string]int, len(n.children))
			for i, c := range n.children {
				if _, dup := pos[c]; !dup {
					pos[c] = i
				}
			}
			byTime(cs, pos)
		}
		for i := len(cs) - 1; i >= 0; i-- {
			stack = append(stack, cs[i])
		}
	}
	if len(out) < len(nodes) {
		seen := make(map[string]bool, len(out))
		for _, n := range out {
			seen[n.key] = true
		}
		for _, k := range keys {
			if !seen[k] {
				return nil, invalid(nodes[k].where, "its parent chain loops (a cycle through %s)", strconv.Quote(nodes[k].parent))
			}
		}
	}
	return out, nil
}

// idFor returns key as a message id when it is a UUID, else a UUID made
// from the thread's id and the key (the same file gives the same ids).
func idFor(threadID uuid.UUID, key string) uuid.UUID {
	if id, err := uuid.Parse(key); err == nil && len(key) == 36 && id != uuid.Nil {
		return id
	}
	return uuid.NewSHA1(threadID, []byte(key))
}

// threadIDFor is idFor for a thread: its id in the file when it is a
// UUID, else a new one.
func threadIDFor(key string) uuid.UUID {
	if id, err := uuid.Parse(key); err == nil && len(key) == 36 && id != uuid.Nil {
		return id
	}
	return uuid.New()
}

// epoch reads a Unix time in seconds (or milliseconds or nanoseconds, by
// its size), microsecond precision like Postgres, or def for none.
func epoch(v float64, def time.Time) time.Time {
	switch {
	case v <= 0 || math.IsNaN(v) || math.IsInf(v, 0):
		return def
	case v > 1e17:
		v /= 1e9
	case v > 1e14:
		v /= 1e6
	case v > 1e11:
		v /= 1e3
	}
	if v > 253402300799 { // after 9999
		return def
	}
	sec, frac := math.Modf(v)
	return time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3).UTC()
}

// title trims a title to the service's 200 bytes, on a rune boundary.
func title(s string, where string) (*string, error) {
	if s == "" {
		return nil, nil
	}
	if err := noNUL(s, where+".title"); err != nil {
		return nil, err
	}
	s = string(bytes.ToValidUTF8([]byte(s), []byte("\uFFFD")))
	for len(s) > 200 {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return &s, nil
}

func noNUL(s, where string) error {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return nulErr(where)
		}
	}
	return nil
}

func nulErr(where string) error {
	return errcode.New(errcode.Invalid, "%s: contains U+0000 (NUL), which Postgres text cannot hold; remove it and import again", where)
}

// hasNULEscape reports whether JSON text holds an escaped U+0000 (\u0000
// not itself escaped).
func hasNULEscape(b []byte) bool {
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(`u0000`))
		if j < 0 {
			return false
		}
		j += i
		k := j - 1
		for k >= 0 && b[k] == '\\' {
			k--
		}
		if (j-1-k)%2 == 1 {
			return true
		}
		i = j + 5
	}
}

// check holds a converted thread to the service's limits and the rules a
// tree obeys: at most MaxThreadMessages messages, at most MaxMessage bytes
// of text a message, no NUL, parents first, a leaf as head.
func check(it *thread.ImportThread, where string, opt Options) error {
	for _, f := range it.Files {
		if opt.MaxAttachment > 0 && f.Size > opt.MaxAttachment {
			return errcode.New(errcode.TooLarge, "%s: attachment %s has %d bytes; an attachment may have %d (THREADLINE_MAX_ATTACHMENT)", where, f.ID, f.Size, opt.MaxAttachment)
		}
	}
	if opt.MaxThreadMessages > 0 && len(it.Nodes) > opt.MaxThreadMessages {
		return errcode.New(errcode.TooLarge, "%s: %d messages; a thread may hold %d (THREADLINE_MAX_THREAD_MESSAGES)", where, len(it.Nodes), opt.MaxThreadMessages)
	}
	if len(it.Thread.Metadata) > 0 && hasNULEscape(it.Thread.Metadata) {
		return nulErr(where + ".metadata")
	}
	for i := range it.Nodes {
		if err := checkNode(&it.Nodes[i], where, opt); err != nil {
			return err
		}
	}
	tree, err := checkpoint.NewTree(it.Nodes)
	if err != nil {
		return invalid(where, "%v", err)
	}
	if it.Head != uuid.Nil && tree.ResolveHead(it.Head) != it.Head {
		return invalid(where, "the head %s is not a leaf of the tree", it.Head)
	}
	return nil
}

func checkNode(n *checkpoint.Node, where string, opt Options) error {
	text := 0
	for _, p := range n.Content {
		text += len(p.Text)
	}
	if opt.MaxMessage > 0 && text > opt.MaxMessage {
		return errcode.New(errcode.TooLarge, "%s: message %s holds %d bytes of text; a message may hold %d (THREADLINE_MAX_MESSAGE)", where, n.ID, text, opt.MaxMessage)
	}
	if len(n.Content) > maxTurnParts {
		return errcode.New(errcode.TooLarge, "%s: message %s has %d parts; a message may have %d", where, n.ID, len(n.Content), maxTurnParts)
	}
	// What the store would write (the wire's shape, the same bytes).
	if hasNULEscape(wire.AppendParts(nil, n.Content)) {
		return nulErr(fmt.Sprintf("%s: message %s", where, n.ID))
	}
	if len(n.Attachments) > 0 {
		if hasNULEscape(wire.AppendAttachments(nil, n.Attachments)) {
			return nulErr(fmt.Sprintf("%s: message %s attachments", where, n.ID))
		}
	}
	return nil
}

// numberNodes sets each node's Seq from 1 up, in order, and its thread.
func numberNodes(it *thread.ImportThread) {
	for i := range it.Nodes {
		it.Nodes[i].Seq = int64(i + 1)
		it.Nodes[i].ThreadID = it.Thread.ID
	}
	it.Thread.LastSeq = int64(len(it.Nodes))
}

// headFor resolves the file's shown node to a leaf of the converted tree:
// the node itself, or (when it was left out) its nearest kept ancestor,
// then its most recent leaf.
func headFor(it *thread.ImportThread, shown uuid.UUID) uuid.UUID {
	tree, err := checkpoint.NewTree(it.Nodes)
	if err != nil {
		return uuid.Nil // check reports the tree's fault
	}
	return tree.ResolveHead(shown)
}

func importMetadata(source, id string, models []string) json.RawMessage {
	md := map[string]any{"import": map[string]any{"source": source, "id": id, "models": models}}
	b, _ := json.Marshal(md) // strings: always marshals
	return b
}
