package api

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/threadline/threadline/checkpoint/errcode"
)

// The text policy, decided here once for every request: every string a
// client sends (JSON keys and values anywhere in a body, and an upload's
// file name) must be valid UTF-8 without U+0000, and a JSON \u escape may
// not be a lone surrogate. Anything else is refused with invalid_request
// naming the field, before a byte of it is stored: Postgres text and jsonb
// cannot hold NUL, and encoding/json would silently replace invalid UTF-8
// and lone surrogates with U+FFFD, so such text could never be returned
// byte-exact. Text that passes is stored and returned as sent.

// textError is the refusal of one string under the policy.
func textError(field, why string) error {
	return &errcode.Error{Code: errcode.Invalid,
		Message: field + " " + why + "; text must be valid UTF-8 without U+0000 (NUL) or lone surrogates",
		Field:   field}
}

// checkText walks a JSON document and refuses the first string the text
// policy does not accept, naming its path (message.content[0].text,
// metadata.tags[2], or "metadata key \"…\"" for a key). A document that is
// not well-formed JSON passes: the decoder then reports it.
func checkText(b []byte) error {
	s := textScan{b: b}
	err := s.value(0)
	var pe *policyError
	if errors.As(err, &pe) {
		return textError(pe.field, pe.why)
	}
	return nil
}

// checkFileName applies the text policy to an upload's file name.
func checkFileName(name string) error {
	switch {
	case !utf8.ValidString(name):
		return textError("file name", "is not valid UTF-8")
	case strings.IndexByte(name, 0) >= 0:
		return textError("file name", "contains U+0000 (NUL)")
	case len(name) > maxFileName:
		return &errcode.Error{Code: errcode.Invalid, Message: "file name is longer than " + strconv.Itoa(maxFileName) + " bytes",
			Field: "file name"}
	}
	return nil
}

// maxFileName bounds an upload's file name (and its raw header), in bytes.
const maxFileName = 1024

type policyError struct{ field, why string }

func (e *policyError) Error() string { return e.field + " " + e.why }

// errMalformed stops the walk: the decoder reports what is wrong.
var errMalformed = errors.New("malformed")

// maxTextDepth is encoding/json's own nesting limit; deeper documents are
// the decoder's to refuse.
const maxTextDepth = 10000

type textScan struct {
	b    []byte
	i    int
	path []string // one element per open object or array
}

func (s *textScan) field() string {
	var sb strings.Builder
	for _, p := range s.path {
		if strings.HasPrefix(p, "[") || sb.Len() == 0 {
			sb.WriteString(p)
		} else {
			sb.WriteString(".")
			sb.WriteString(p)
		}
	}
	if sb.Len() == 0 {
		return "body"
	}
	return sb.String()
}

func (s *textScan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *textScan) value(depth int) error {
	if depth > maxTextDepth {
		return errMalformed
	}
	s.ws()
	if s.i >= len(s.b) {
		return errMalformed
	}
	switch s.b[s.i] {
	case '{':
		return s.object(depth)
	case '[':
		return s.array(depth)
	case '"':
		why, err := s.str()
		if err != nil {
			return err
		}
		if why != "" {
			return &policyError{field: s.field(), why: why}
		}
		return nil
	}
	// A number, true, false or null: skip to the next delimiter.
	for s.i < len(s.b) && !strings.ContainsRune(",]} \t\r\n", rune(s.b[s.i])) {
		s.i++
	}
	return nil
}

func (s *textScan) object(depth int) error {
	if s.enter('}') {
		return nil
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return errMalformed
		}
		start := s.i
		why, err := s.str()
		if err != nil {
			return err
		}
		key := string(s.b[start+1 : s.i-1])
		if why != "" {
			where := s.field()
			return &policyError{field: where + " key", why: why}
		}
		if strings.Contains(key, `\`) {
			if k, err := strconv.Unquote(`"` + key + `"`); err == nil {
				key = k
			}
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return errMalformed
		}
		s.i++
		if err := s.member(key, depth); err != nil {
			return err
		}
		if end, err := s.next('}'); end || err != nil {
			return err
		}
	}
}

func (s *textScan) array(depth int) error {
	if s.enter(']') {
		return nil
	}
	for n := 0; ; n++ {
		if err := s.member("["+strconv.Itoa(n)+"]", depth); err != nil {
			return err
		}
		if end, err := s.next(']'); end || err != nil {
			return err
		}
	}
}

// enter steps into the object or array at s.i, which close ends, and
// reports whether it is empty (then it also steps past close).
func (s *textScan) enter(close byte) (empty bool) {
	s.i++ // { or [
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == close {
		s.i++
		return true
	}
	return false
}

// member walks the value of an object's key or an array's element, its
// path element name, at depth+1.
func (s *textScan) member(name string, depth int) error {
	s.path = append(s.path, name)
	if err := s.value(depth + 1); err != nil {
		return err
	}
	s.path = s.path[:len(s.path)-1]
	return nil
}

// next steps past the comma after a member of the object or array that
// close ends, or past close, and reports whether it was the end; anything
// else is errMalformed.
func (s *textScan) next(close byte) (end bool, err error) {
	s.ws()
	if s.i >= len(s.b) {
		return false, errMalformed
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		return false, nil
	case close:
		s.i++
		return true, nil
	}
	return false, errMalformed
}

// str reads a string literal at s.i and returns why the policy refuses it
// ("" if it does not).
func (s *textScan) str() (string, error) {
	s.i++ // opening quote
	why := ""
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return why, nil
		case c == '\\':
			w, err := s.escape()
			if err != nil {
				return "", err
			}
			if why == "" {
				why = w
			}
		case c < 0x20:
			return "", errMalformed
		case c < utf8.RuneSelf:
			s.i++
		default:
			r, n := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && n == 1 && why == "" {
				why = "is not valid UTF-8"
			}
			s.i += n
		}
	}
	return "", errMalformed
}

// escape reads one backslash escape at s.i.
func (s *textScan) escape() (string, error) {
	if s.i+1 >= len(s.b) {
		return "", errMalformed
	}
	if s.b[s.i+1] != 'u' {
		s.i += 2
		return "", nil
	}
	r, ok := hex4(s.b, s.i+2)
	if !ok {
		return "", errMalformed
	}
	s.i += 6
	switch {
	case r == 0:
		return "contains U+0000 (NUL)", nil
	case r >= 0xDC00 && r <= 0xDFFF:
		return "contains a lone surrogate", nil
	case r >= 0xD800 && r <= 0xDBFF:
		if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
			if lo, ok := hex4(s.b, s.i+2); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				s.i += 6
				return "", nil
			}
		}
		return "contains a lone surrogate", nil
	}
	return "", nil
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
