package checkpoint

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// The appenders below write the wire shapes byte for byte as
// encoding/json writes them (field order, omitempty, HTML escaping), tested
// against it. encoding/json re-validates and copies the output of every
// MarshalJSON method on the way up, once per nesting level: a snapshot of
// a long thread spent most of its encoding time doing so.

// AppendJSONString appends s as a JSON string. Plain printable ASCII is
// quoted here; anything else goes to encoding/json, so the escaping is
// always the standard library's.
func AppendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// AppendUUID appends u in its canonical text form, unquoted.
func AppendUUID(b []byte, u uuid.UUID) []byte {
	const hexdigits = "0123456789abcdef"
	for i, x := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hexdigits[x>>4], hexdigits[x&0xf])
	}
	return b
}

// AppendJSONUUID appends u as a JSON string, or null for a nil pointer.
func AppendJSONUUID(b []byte, u *uuid.UUID) []byte {
	if u == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = AppendUUID(b, *u)
	return append(b, '"')
}

func (p *Part) appendJSON(b []byte) []byte {
	switch p.Type {
	case PartText:
		b = append(b, `{"type":"text","text":`...)
		b = AppendJSONString(b, p.Text)
		return append(b, '}')
	case PartReasoning:
		b = append(b, `{"type":"reasoning","text":`...)
		b = AppendJSONString(b, p.Text)
		return append(b, '}')
	case "image":
		b = append(b, `{"type":"image","image":`...)
		b = AppendJSONString(b, p.Image)
		return append(b, '}')
	}
	q, _ := json.Marshal(*p) // plain strings: always marshals
	return append(b, q...)
}

// appendArray appends xs as a JSON array (null when nil), each element
// by appendOne.
func appendArray[T any](b []byte, xs []T, appendOne func([]byte, *T) []byte) []byte {
	if xs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendOne(b, &xs[i])
	}
	return append(b, ']')
}

func appendParts(b []byte, parts []Part) []byte {
	return appendArray(b, parts, func(b []byte, p *Part) []byte { return p.appendJSON(b) })
}

// AppendJSON appends the message as encoding/json writes it.
func (m *Message) AppendJSON(b []byte) []byte {
	b = append(b, `{"id":"`...)
	b = AppendUUID(b, m.ID)
	b = append(b, `","role":`...)
	b = AppendJSONString(b, string(m.Role))
	b = append(b, `,"content":`...)
	b = appendParts(b, m.Content)
	b = append(b, `,"createdAt":`...)
	if y := m.CreatedAt.Year(); y >= 0 && y <= 9999 {
		b = append(b, '"')
		b = m.CreatedAt.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	} else {
		q, _ := json.Marshal(m.CreatedAt) // out of range: let it decide
		b = append(b, q...)
	}
	if s := m.Status; s != nil {
		b = append(b, `,"status":{"type":`...)
		b = AppendJSONString(b, s.Type)
		if s.Reason != "" {
			b = append(b, `,"reason":`...)
			b = AppendJSONString(b, s.Reason)
		}
		if s.Error != "" {
			b = append(b, `,"error":`...)
			b = AppendJSONString(b, s.Error)
		}
		b = append(b, '}')
	}
	if a := m.Attachments; a != nil {
		b = append(b, `,"attachments":`...)
		if len(*a) == 0 && *a != nil {
			b = append(b, "[]"...)
		} else {
			q, _ := json.Marshal(*a) // plain fields: always marshals
			b = append(b, q...)
		}
	}
	b = append(b, `,"metadata":{`...)
	if r := m.Metadata.RunID; r != nil {
		b = append(b, `"runId":`...)
		b = AppendJSONUUID(b, r)
		b = append(b, ',')
	}
	c := &m.Metadata.Custom
	b = append(b, `"custom":{"checkpointId":`...)
	b = AppendJSONUUID(b, c.CheckpointID)
	b = append(b, `,"parentCheckpointId":`...)
	b = AppendJSONUUID(b, c.ParentCheckpointID)
	if c.RunID != nil {
		b = append(b, `,"runId":`...)
		b = AppendJSONUUID(b, c.RunID)
	}
	return append(b, "}}}"...)
}

// AppendMessages appends a message list as encoding/json writes it.
func AppendMessages(b []byte, ms []Message) []byte {
	return appendArray(b, ms, func(b []byte, m *Message) []byte { return m.AppendJSON(b) })
}

// AppendJSON appends the repository as encoding/json writes it.
func (r *Repository) AppendJSON(b []byte) []byte {
	b = append(b, `{"headId":`...)
	b = AppendJSONUUID(b, r.HeadID)
	b = append(b, `,"messages":`...)
	b = appendArray(b, r.Messages, func(b []byte, it *RepositoryItem) []byte {
		b = append(b, `{"message":`...)
		b = it.Message.AppendJSON(b)
		b = append(b, `,"parentId":`...)
		b = AppendJSONUUID(b, it.ParentID)
		return append(b, '}')
	})
	return append(b, '}')
}
