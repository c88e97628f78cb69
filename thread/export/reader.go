package export

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// Options bound and complete what a Reader reads.
type Options struct {
	// MaxMessage bounds the text (text and reasoning parts) of one
	// message, in bytes (0: no limit).
	MaxMessage int
	// MaxThreadMessages bounds the messages of one thread (0: no limit).
	MaxThreadMessages int
	// MaxAttachment bounds the bytes of one attachment carried inline (0:
	// no limit).
	MaxAttachment int64
	// Now stands for a time the file does not give (a message without a
	// timestamp).
	Now time.Time
	// TempDir holds a ZIP while it is read ("": the system's).
	TempDir string
}

// maxTurnParts bounds the parts of one assistant turn: an import merges a
// turn's steps into continuation checkpoints that each hold the turn so
// far, so a turn's cost grows with the square of its steps.
const maxTurnParts = 1000

// Reader yields the threads of an export file, one at a time: a
// Threadline document (or an array of them), ChatGPT's conversations.json
// (an array of conversations, or one), Open WebUI's chat export (an array
// of chats, or one), or a ZIP holding any of these as *.json entries
// (entries that hold none of them are skipped). A JSON array is read one
// element at a time, so a large file never sits in memory whole.
//
// Next's errors are invalid_request or too_large errors whose message
// names where in the file the problem is, e.g.
// conversations[12].mapping["abc"]: parent "x" not found.
type Reader struct {
	opt     Options
	srcs    []source // still to read
	cur     *arrayReader
	tmp     *os.File
	zipped  bool
	threads int
}

type source struct {
	name string
	open func() (io.ReadCloser, error)
}

// zipMagic opens every ZIP file.
var zipMagic = []byte("PK\x03\x04")

// NewReader reads r. A ZIP (known by its first bytes) is copied to a
// temporary file first, which Close removes.
func NewReader(r io.Reader, opt Options) (*Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, _ := br.Peek(len(zipMagic))
	rd := &Reader{opt: opt}
	if !bytes.Equal(head, zipMagic) {
		rd.srcs = []source{{name: "conversations", open: func() (io.ReadCloser, error) { return io.NopCloser(br), nil }}}
		return rd, nil
	}
	if err := rd.openZip(br); err != nil {
		rd.Close()
		return nil, err
	}
	return rd, nil
}

func (rd *Reader) openZip(r io.Reader) error {
	f, err := os.CreateTemp(rd.opt.TempDir, "threadline-import-*.zip")
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	rd.tmp, rd.zipped = f, true
	n, err := io.Copy(f, r)
	if err != nil {
		return err // the body's own error (too large, cut off)
	}
	zr, err := zip.NewReader(f, n)
	if err != nil {
		return errcode.New(errcode.Invalid, "the file is not a readable ZIP: %v", err)
	}
	files := append([]*zip.File(nil), zr.File...)
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	for _, zf := range files {
		if zf.FileInfo().IsDir() || !strings.EqualFold(path.Ext(zf.Name), ".json") || strings.HasPrefix(path.Base(zf.Name), "._") {
			continue
		}
		rd.srcs = append(rd.srcs, source{name: zf.Name, open: zf.Open})
	}
	if len(rd.srcs) == 0 {
		return errcode.New(errcode.Invalid, "the ZIP holds no .json file")
	}
	return nil
}

// Close releases the temporary file of a ZIP.
func (rd *Reader) Close() {
	if rd.cur != nil {
		rd.cur.close()
		rd.cur = nil
	}
	if rd.tmp != nil {
		rd.tmp.Close()
		os.Remove(rd.tmp.Name())
		rd.tmp = nil
	}
}

// Next returns the next thread, or io.EOF after the last. A file that holds
// no thread at all is an error.
func (rd *Reader) Next() (*thread.ImportThread, error) {
	for {
		if rd.cur == nil {
			if len(rd.srcs) == 0 {
				if rd.threads == 0 {
					return nil, errcode.New(errcode.Invalid, "the file holds no conversation: expected a Threadline export, ChatGPT's conversations.json or an Open WebUI chat export")
				}
				return nil, io.EOF
			}
			src := rd.srcs[0]
			rd.srcs = rd.srcs[1:]
			ar, err := openArray(src, rd.zipped)
			if err != nil {
				return nil, err
			}
			rd.cur = ar
		}
		raw, where, err := rd.cur.next()
		if errors.Is(err, io.EOF) {
			rd.cur.close()
			rd.cur = nil
			continue
		}
		if err != nil {
			return nil, err
		}
		it, err := rd.convert(raw, where)
		if errors.Is(err, errSkip) {
			rd.cur.close()
			rd.cur = nil // a ZIP entry that holds something else
			continue
		}
		if err != nil {
			return nil, err
		}
		rd.cur.first = false
		rd.threads++
		return it, nil
	}
}

// errSkip marks a ZIP entry that is not a conversation.
var errSkip = errors.New("not a conversation")

// kind tells the formats apart by their keys.
type kind struct {
	Format  *string         `json:"format"`
	Mapping json.RawMessage `json:"mapping"`
	Chat    json.RawMessage `json:"chat"`
	History json.RawMessage `json:"history"`
}

func (rd *Reader) convert(raw json.RawMessage, where string) (*thread.ImportThread, error) {
	var k kind
	if err := json.Unmarshal(raw, &k); err != nil {
		if rd.zipped && rd.cur.first {
			return nil, errSkip
		}
		return nil, invalid(where, "must be a conversation object: %v", jsonErr(err))
	}
	var it *thread.ImportThread
	var err error
	switch {
	case k.Format != nil:
		it, err = fromDocument(raw, where)
	case k.Mapping != nil:
		it, err = fromChatGPT(raw, where, rd.opt)
	case k.Chat != nil || k.History != nil:
		it, err = fromOpenWebUI(raw, where, rd.opt)
	case rd.zipped && rd.cur.first:
		return nil, errSkip
	default:
		return nil, invalid(where, "is neither a Threadline export (format), a ChatGPT conversation (mapping) nor an Open WebUI chat (chat.history)")
	}
	if err != nil {
		return nil, err
	}
	if err := check(it, where, rd.opt); err != nil {
		return nil, err
	}
	return it, nil
}

// arrayReader yields the elements of a top-level array one at a time, or
// a single top-level object.
type arrayReader struct {
	name   string
	rc     io.ReadCloser
	dec    *json.Decoder
	single bool
	done   bool
	i      int
	first  bool
}

func openArray(src source, zipped bool) (*arrayReader, error) {
	rc, err := src.open()
	if err != nil {
		return nil, errcode.New(errcode.Invalid, "%s: cannot be read: %v", src.name, err)
	}
	br := bufio.NewReaderSize(rc, 64<<10)
	// A byte order mark and white space before the value.
	if b, _ := br.Peek(3); bytes.Equal(b, []byte("\xef\xbb\xbf")) {
		_, _ = br.Discard(3)
	}
	var c byte
	for {
		c, err = br.ReadByte()
		if err != nil {
			rc.Close()
			if zipped {
				return &arrayReader{done: true, rc: io.NopCloser(nil)}, nil
			}
			return nil, errcode.New(errcode.Invalid, "%s: the file is empty", src.name)
		}
		if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
			break
		}
	}
	_ = br.UnreadByte()
	ar := &arrayReader{name: strings.TrimSuffix(path.Base(src.name), ".json"), rc: rc, dec: json.NewDecoder(br), first: true}
	switch c {
	case '[':
		_, _ = ar.dec.Token() // the '['
	case '{':
		ar.single = true
	default:
		if zipped {
			ar.done = true
			return ar, nil
		}
		rc.Close()
		return nil, errcode.New(errcode.Invalid, "%s: must be a JSON array of conversations or one conversation object", src.name)
	}
	return ar, nil
}

func (ar *arrayReader) close() {
	if ar.rc != nil {
		ar.rc.Close()
	}
}

func (ar *arrayReader) next() (json.RawMessage, string, error) {
	if ar.done {
		return nil, "", io.EOF
	}
	var raw json.RawMessage
	if ar.single {
		ar.done = true
		if err := ar.dec.Decode(&raw); err != nil {
			return nil, "", decodeErr(ar.name, err)
		}
		if _, err := ar.dec.Token(); !errors.Is(err, io.EOF) {
			return nil, "", invalid(ar.name, "must hold one JSON value; something follows it")
		}
		return raw, ar.name, nil
	}
	where := fmt.Sprintf("%s[%d]", ar.name, ar.i)
	if !ar.dec.More() {
		ar.done = true
		if _, err := ar.dec.Token(); err != nil { // the ']'
			return nil, "", decodeErr(where, err)
		}
		if _, err := ar.dec.Token(); !errors.Is(err, io.EOF) {
			return nil, "", invalid(ar.name, "must hold one JSON array; something follows it")
		}
		return nil, "", io.EOF
	}
	if err := ar.dec.Decode(&raw); err != nil {
		return nil, "", decodeErr(where, err)
	}
	ar.i++
	return raw, where, nil
}

// decodeErr names a syntax error's place; a body over its limit stays
// what it is.
func decodeErr(where string, err error) error {
	if _, ok := errcode.As(err); ok {
		return err
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return invalid(where, "malformed JSON at byte %d of the file: %v", se.Offset, err)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return invalid(where, "the file ends in the middle of a value")
	}
	if strings.Contains(err.Error(), "too large") || strings.Contains(err.Error(), "over the") {
		return errcode.New(errcode.TooLarge, "the file is over the import limit")
	}
	return invalid(where, "cannot be read: %v", err)
}

func invalid(where, format string, args ...any) error {
	return errcode.New(errcode.Invalid, "%s: %s", where, fmt.Sprintf(format, args...))
}

// jsonErr says what a decoding error found, with the field it names.
func jsonErr(err error) string {
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		f := ute.Field
		if f == "" {
			return fmt.Sprintf("a JSON %s where %s belongs", ute.Value, ute.Type)
		}
		return fmt.Sprintf("%s: a JSON %s where %s belongs", f, ute.Value, ute.Type)
	}
	return err.Error()
}
