// Package chat is `threadline chat`, a terminal client of a Threadline
// service on the Go client (api/client): a line-based REPL that streams
// replies, lists and opens threads, regenerates, edits, switches branches,
// shows tool calls and reasoning, answers approvals and ask_user inline,
// and rejoins a reply after a dropped connection.
package chat

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/threadline/threadline/api/client"
)

// Help is what /help prints.
const Help = `Commands:
  <text>         send a message (under the reply shown)
  /list          list your threads (most recent first)
  /open <n|id>   open a thread by its number in /list or its id
  /new           start a new thread
  /regen         regenerate the last reply (a new branch)
  /edit <text>   edit your last message (a new branch) and get a reply
  /prev, /next   show the previous / next branch of the last reply
                 (or Alt-Left / Alt-Right, then Enter)
  /help          this list
  /quit          exit (or Ctrl-D)
Ctrl-C during a reply cancels the run; Ctrl-D exits.
`

// Main runs the chat until stdin ends or /quit. It fails only when its
// flags are wrong or the service cannot be reached at start.
func Main(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "http://127.0.0.1:8080", "the service's base URL")
	key := fs.String("key", getenv("THREADLINE_API_KEY"), "API key (default $THREADLINE_API_KEY)")
	model := fs.String("model", "", "model of new runs (default: the service's default)")
	open := fs.String("thread", "", "open this thread at start")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s := &session{
		c:     client.New(*url, client.WithKey(*key)),
		out:   &lockedWriter{w: stdout},
		lines: readLines(stdin),
		model: *model,
		color: getenv("NO_COLOR") == "",
	}
	tools, err := s.c.Tools(ctx)
	if err != nil {
		return fmt.Errorf("chat: reach %s: %w", *url, err)
	}
	s.tools = tools
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	go s.interrupts(ctx, sigs)
	s.printf("threadline chat on %s. /help lists commands; Ctrl-D exits.\n", *url)
	if *open != "" {
		s.open(ctx, *open)
	}
	for {
		s.printf("you> ")
		line, ok := <-s.lines
		if !ok {
			s.printf("\n")
			return nil
		}
		if !s.handle(ctx, strings.TrimSpace(line)) {
			return nil
		}
	}
}

// readLines sends stdin's lines on a channel closed at its end.
func readLines(r io.Reader) <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}

// lockedWriter serialises the REPL's and the interrupt handler's output.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// session is the REPL's state: the thread shown and its branch.
type session struct {
	c        *client.Client
	out      io.Writer
	lines    <-chan string
	model    string
	color    bool
	tools    []client.Tool
	threadID string
	path     []client.Message   // root to the head shown
	repo     *client.Repository // every message of the thread
	listed   []client.Thread    // the last /list
	current  atomic.Pointer[client.Run]
}

func (s *session) printf(format string, a ...any) { fmt.Fprintf(s.out, format, a...) }

// dim is text shown faint: reasoning, tool traffic, notes.
func (s *session) dim(text string) string {
	if !s.color {
		return text
	}
	return "\x1b[2m" + text + "\x1b[0m"
}

// interrupts cancels the run in progress on Ctrl-C.
func (s *session) interrupts(ctx context.Context, sigs <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sigs:
		}
		r := s.current.Load()
		if r == nil {
			s.printf("\n%s\nyou> ", s.dim("(no reply to cancel; Ctrl-D exits)"))
			continue
		}
		s.printf("%s", s.dim(" ^C cancelling…"))
		if err := s.c.RunCancel(ctx, r.ThreadID, r.RunID); err != nil {
			s.printf("\n%s\n", s.errText(err))
		}
	}
}

// keys maps the escape sequences of Alt-Left and Alt-Right (xterm's, and
// the Meta-b / Meta-f of terminals that send those), typed alone on a
// line, to /prev and /next.
var keys = map[string]string{
	"\x1b[1;3D": "/prev", "\x1b[1;9D": "/prev", "\x1bb": "/prev",
	"\x1b[1;3C": "/next", "\x1b[1;9C": "/next", "\x1bf": "/next",
}

// handle runs one line; false ends the REPL.
func (s *session) handle(ctx context.Context, line string) bool {
	if line == "" {
		return true
	}
	if cmd, ok := keys[line]; ok {
		line = cmd
	}
	if !strings.HasPrefix(line, "/") {
		s.run(ctx, client.RunRequest{Message: &client.NewMessage{Content: line}, ParentMessageID: s.headID()})
		return true
	}
	cmd, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	switch cmd {
	case "/quit", "/exit":
		return false
	case "/help":
		s.printf("%s", Help)
	case "/list":
		s.list(ctx)
	case "/open":
		s.open(ctx, arg)
	case "/new":
		s.threadID, s.path, s.repo = "", nil, nil
		s.printf("%s\n", s.dim("(new thread)"))
	case "/regen":
		s.regen(ctx)
	case "/edit":
		s.edit(ctx, arg)
	case "/prev":
		s.sibling(ctx, -1)
	case "/next":
		s.sibling(ctx, +1)
	default:
		s.printf("unknown command %s; /help lists them\n", cmd)
	}
	return true
}

// errText is an error as the REPL shows it: the service's code and
// message.
func (s *session) errText(err error) string {
	var e *client.Error
	if errors.As(err, &e) {
		return fmt.Sprintf("error: %s: %s", e.Code, e.Message)
	}
	return "error: " + err.Error()
}

// headID is the id of the message shown last ("" on an empty thread).
func (s *session) headID() string {
	if len(s.path) == 0 {
		return ""
	}
	return s.path[len(s.path)-1].ID
}

// last returns the last message of role on the path shown.
func (s *session) last(role string) *client.Message {
	for i := len(s.path) - 1; i >= 0; i-- {
		if s.path[i].Role == role {
			return &s.path[i]
		}
	}
	return nil
}

// parentOf returns a message's parent id ("" for a root).
func (s *session) parentOf(id string) string {
	if s.repo == nil {
		return ""
	}
	for _, m := range s.repo.Messages {
		if m.Message.ID == id && m.ParentID != nil {
			return *m.ParentID
		}
	}
	return ""
}

// apply takes a snapshot's path and repository as the view.
func (s *session) apply(threadID string, path []client.Message, repo *client.Repository) {
	s.threadID, s.path = threadID, path
	if repo != nil {
		s.repo = repo
	}
}

// branch is "[i/n]" for a message with siblings, else "".
func (s *session) branch(id string) string {
	if s.repo == nil {
		return ""
	}
	sibs, at := s.repo.Siblings(id)
	if len(sibs) < 2 {
		return ""
	}
	return fmt.Sprintf("[%d/%d] ", at+1, len(sibs))
}

func (s *session) list(ctx context.Context) {
	page, err := s.c.ThreadList(ctx, 20, "")
	if err != nil {
		s.printf("%s\n", s.errText(err))
		return
	}
	s.listed = page.Threads
	if len(page.Threads) == 0 {
		s.printf("no threads yet\n")
	}
	for i, t := range page.Threads {
		title := "(untitled)"
		if t.Title != nil {
			title = *t.Title
		}
		mark := " "
		if t.ThreadID == s.threadID {
			mark = "*"
		}
		s.printf("%s%2d. %s  %s\n", mark, i+1, title, s.dim(t.ThreadID+" "+t.UpdatedAt.Format("2006-01-02 15:04")))
	}
}

func (s *session) open(ctx context.Context, arg string) {
	id := arg
	var n int
	if _, err := fmt.Sscan(arg, &n); err == nil && len(arg) < 6 {
		if n < 1 || n > len(s.listed) {
			s.printf("no thread %d in the last /list\n", n)
			return
		}
		id = s.listed[n-1].ThreadID
	}
	if _, err := uuid.Parse(id); err != nil {
		s.printf("usage: /open <number from /list | thread id>\n")
		return
	}
	snap, err := s.c.ThreadMessages(ctx, id)
	if err != nil {
		s.printf("%s\n", s.errText(err))
		return
	}
	s.apply(snap.ThreadID, snap.Messages, snap.Repository)
	for i := range snap.Messages {
		if snap.ActiveRun != nil && snap.Messages[i].ID == snap.ActiveRun.MessageID {
			break // the running reply follows, rejoined
		}
		s.show(&snap.Messages[i])
	}
	if snap.ActiveRun != nil {
		r, err := s.c.RunRejoin(ctx, id, snap.ActiveRun.RunID, 0)
		if err != nil {
			s.printf("%s\n", s.errText(err))
			return
		}
		s.stream(r)
	}
}

func (s *session) regen(ctx context.Context) {
	reply := s.last("assistant")
	if reply == nil {
		s.printf("nothing to regenerate\n")
		return
	}
	s.run(ctx, client.RunRequest{ParentMessageID: s.parentOf(reply.ID), SourceMessageID: reply.ID})
}

func (s *session) edit(ctx context.Context, text string) {
	msg := s.last("user")
	if msg == nil || text == "" {
		s.printf("usage: /edit <text> (replaces your last message)\n")
		return
	}
	s.run(ctx, client.RunRequest{Message: &client.NewMessage{Content: text}, ParentMessageID: s.parentOf(msg.ID), SourceMessageID: msg.ID})
}

// sibling shows the branch before (-1) or after (+1) the last reply's.
func (s *session) sibling(ctx context.Context, step int) {
	id := s.headID()
	if s.repo == nil || id == "" {
		s.printf("no reply to switch\n")
		return
	}
	// The last message of the path is a leaf: switch the newest message
	// on the path that has siblings.
	var sibs []string
	at := -1
	for i := len(s.path) - 1; i >= 0 && len(sibs) < 2; i-- {
		sibs, at = s.repo.Siblings(s.path[i].ID)
	}
	to := at + step
	if len(sibs) < 2 || to < 0 || to >= len(sibs) {
		s.printf("no other branch that way\n")
		return
	}
	if err := s.c.ThreadSetHead(ctx, s.threadID, sibs[to]); err != nil {
		s.printf("%s\n", s.errText(err))
		return
	}
	snap, err := s.c.ThreadMessages(ctx, s.threadID)
	if err != nil {
		s.printf("%s\n", s.errText(err))
		return
	}
	s.apply(snap.ThreadID, snap.Messages, snap.Repository)
	for i := range snap.Messages {
		if snap.Messages[i].ID == sibs[to] {
			for j := max(i-1, 0); j < len(snap.Messages); j++ {
				s.show(&snap.Messages[j])
			}
		}
	}
}
