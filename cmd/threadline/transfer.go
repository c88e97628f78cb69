package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/export"
)

// The export and import subcommands talk to the database through the
// store, as serve does (no server needs to run): the same documents and the
// same one-transaction import as the HTTP routes.

// transferFlags are the settings both subcommands share.
type transferFlags struct {
	fs     *flag.FlagSet
	url    string
	caller string
}

func newTransferFlags(name, usage string, getenv func(string) string, stderr io.Writer) (*transferFlags, *envFlags) {
	fs := flag.NewFlagSet("threadline "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	tf := &transferFlags{fs: fs}
	e := &envFlags{fs: fs, getenv: getenv}
	e.str(&tf.url, "database-url", "THREADLINE_DATABASE_URL", "", "Postgres URL")
	fs.StringVar(&tf.caller, "caller", "local", "the caller whose threads these are (\"local\" when authentication is off)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
	}
	return tf, e
}

func (tf *transferFlags) open(ctx context.Context, e *envFlags) (*store.Store, error) {
	if len(e.errs) > 0 {
		return nil, errors.Join(e.errs...)
	}
	if tf.url == "" {
		return nil, errors.New("set THREADLINE_DATABASE_URL (or --database-url)")
	}
	if err := store.MigrateUp(ctx, tf.url); err != nil {
		return nil, err
	}
	return store.Open(ctx, tf.url, 4)
}

// exportCmd writes one file per thread (JSON or Markdown) into a
// directory: the named threads, the caller's, or every caller's (then in a
// directory per caller).
func exportCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	tf, e := newTransferFlags("export", "usage: threadline export [flags] --out DIR [THREAD_ID...]", getenv, stderr)
	var out, format string
	var all, inline bool
	tf.fs.StringVar(&out, "out", "", "directory to write into (created if missing)")
	tf.fs.StringVar(&format, "format", "json", "json (the whole tree) or markdown (the shown branch)")
	tf.fs.BoolVar(&all, "all-callers", false, "export every caller's threads, in a directory per caller")
	tf.fs.BoolVar(&inline, "inline-attachments", false, "put attachments' bytes in the JSON (base64)")
	if err := tf.fs.Parse(args); err != nil {
		return err
	}
	if out == "" || (format != "json" && format != "markdown") {
		tf.fs.Usage()
		return errors.New("export needs --out DIR and --format json or markdown")
	}
	st, err := tf.open(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()
	var refs []thread.ThreadRef
	for _, a := range tf.fs.Args() {
		id, err := uuid.Parse(a)
		if err != nil {
			return fmt.Errorf("%q is not a thread id", a)
		}
		refs = append(refs, thread.ThreadRef{Caller: tf.caller, ID: id})
	}
	if len(refs) == 0 {
		if refs, err = st.ThreadRefs(ctx, tf.caller, all); err != nil {
			return err
		}
	}
	prog := progress(stderr)
	for i, ref := range refs {
		dir := out
		if all {
			dir = filepath.Join(out, url.PathEscape(ref.Caller))
		}
		if err := exportOne(ctx, st, ref, dir, format, inline); err != nil {
			return err
		}
		prog("exported %d/%d threads", i+1, len(refs))
	}
	prog("")
	fmt.Fprintf(stdout, "exported %d threads to %s\n", len(refs), out)
	return nil
}

func exportOne(ctx context.Context, st *store.Store, ref thread.ThreadRef, dir, format string, inline bool) error {
	x, err := st.ThreadExport(ctx, ref.Caller, ref.ID)
	if err != nil {
		return fmt.Errorf("thread %s: %w", ref.ID, err)
	}
	var b []byte
	ext := ".json"
	if format == "markdown" {
		b, err = export.Markdown(x, uuid.Nil)
		ext = ".md"
	} else {
		var data export.AttachmentData
		if inline {
			data = func(sid string) ([]byte, error) {
				f, err := st.AttachmentGet(ctx, ref.Caller, uuid.MustParse(sid))
				if err != nil {
					return nil, err
				}
				return f.Data, nil
			}
		}
		var d *export.Document
		if d, err = export.Build(x, data); err == nil {
			b, err = d.Encode()
		}
	}
	if err != nil {
		return fmt.Errorf("thread %s: %w", ref.ID, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ref.ID.String()+ext), b, 0o644)
}

// importCmd imports a file of threads for a caller in one transaction.
func importCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	tf, e := newTransferFlags("import", "usage: threadline import [flags] FILE (a Threadline JSON export, ChatGPT's conversations.json or its ZIP, an Open WebUI chat export)", getenv, stderr)
	var maxMsg, maxThread, maxAtt int64
	e.num(&maxAtt, "max-attachment", "THREADLINE_MAX_ATTACHMENT", 10<<20, "bytes of one attachment carried inline")
	e.num(&maxMsg, "max-message", "THREADLINE_MAX_MESSAGE", 256<<10, "message text limit in bytes")
	e.num(&maxThread, "max-thread-messages", "THREADLINE_MAX_THREAD_MESSAGES", 10000, "messages one thread may hold (0: off)")
	if err := tf.fs.Parse(args); err != nil {
		return err
	}
	if tf.fs.NArg() != 1 {
		tf.fs.Usage()
		return errors.New("import needs one FILE")
	}
	f, err := os.Open(tf.fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := tf.open(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()
	rd, err := export.NewReader(f, export.Options{MaxMessage: int(maxMsg), MaxThreadMessages: int(maxThread), MaxAttachment: maxAtt, Now: nowUTC()})
	if err != nil {
		return err
	}
	defer rd.Close()
	prog := progress(stderr)
	n := 0
	res, err := st.ThreadImport(ctx, tf.caller, func() (*thread.ImportThread, error) {
		it, err := rd.Next()
		if err == nil {
			n++
			prog("read %d threads", n)
		}
		return it, err
	})
	prog("")
	if err != nil {
		return fmt.Errorf("nothing imported: %w", err)
	}
	msgs := 0
	for _, r := range res {
		msgs += r.Messages
	}
	fmt.Fprintf(stdout, "imported %d threads (%d messages) for caller %q\n", len(res), msgs, tf.caller)
	return nil
}

// progress returns a printer of one updating line on stderr when it is a
// terminal, else one that prints nothing. An empty format ends the line.
func progress(stderr io.Writer) func(format string, args ...any) {
	f, ok := stderr.(*os.File)
	if !ok {
		return func(string, ...any) {}
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return func(string, ...any) {}
	}
	return func(format string, args ...any) {
		if format == "" {
			fmt.Fprint(f, "\n")
			return
		}
		fmt.Fprintf(f, "\r"+format, args...)
	}
}

func nowUTC() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }
