package wire

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
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

// AppendPart appends a content part in assistant-ui's shape for its type:
// a text or reasoning part with its text even when empty, an image part
// with its image, a tool-call part with its args ({} until they parse)
// and argsText, and its result and isError once it has a result.
func AppendPart(b []byte, p *checkpoint.Part) []byte {
	switch p.Type {
	case checkpoint.PartText:
		b = append(b, `{"type":"text","text":`...)
		b = AppendJSONString(b, p.Text)
		return append(b, '}')
	case checkpoint.PartReasoning:
		b = append(b, `{"type":"reasoning","text":`...)
		b = AppendJSONString(b, p.Text)
		return append(b, '}')
	case checkpoint.PartImage:
		b = append(b, `{"type":"image","image":`...)
		b = AppendJSONString(b, p.Image)
		return append(b, '}')
	}
	q, _ := json.Marshal(partShape(p)) // strings and valid JSON values: always marshals
	return append(b, q...)
}

// partShape is the value encoding/json writes for a part that is not
// text, reasoning or an image.
func partShape(p *checkpoint.Part) any {
	switch p.Type {
	case checkpoint.PartToolCall:
		return toolCallShape(p)
	case checkpoint.PartData:
		return struct {
			Type string          `json:"type"`
			Name string          `json:"name"`
			Data json.RawMessage `json:"data"`
		}{p.Type, p.Name, thread.OrNull(p.Data)}
	case checkpoint.PartSource:
		return struct {
			Type       string `json:"type"`
			SourceType string `json:"sourceType"`
			ID         string `json:"id"`
			URL        string `json:"url"`
			Title      string `json:"title,omitempty"`
		}{p.Type, p.SourceType, p.ID, p.URL, p.Title}
	case checkpoint.PartFile:
		return struct {
			Type     string          `json:"type"`
			Filename string          `json:"filename,omitempty"`
			MimeType string          `json:"mimeType"`
			Data     json.RawMessage `json:"data"`
		}{p.Type, p.Filename, p.MimeType, thread.OrNull(p.Data)}
	}
	q := wirePart(p)
	return &q
}

// wirePart is p in the wire's Part type.
func wirePart(p *checkpoint.Part) Part {
	return Part{Type: p.Type, Text: p.Text, Image: p.Image, ToolCallID: p.ToolCallID, ToolName: p.ToolName,
		Args: p.Args, ArgsText: p.ArgsText, Result: p.Result, IsError: p.IsError, Name: p.Name, Data: p.Data,
		SourceType: p.SourceType, ID: p.ID, URL: p.URL, Title: p.Title, Filename: p.Filename, MimeType: p.MimeType,
		Subagent: subagentRef(p.Subagent)}
}

// subagentRef is r's wire shape (nil for nil).
func subagentRef(r *checkpoint.SubagentRef) *SubagentRef {
	if r == nil {
		return nil
	}
	return &SubagentRef{ThreadID: r.ThreadID.String(), RunID: r.RunID.String()}
}

func toolCallShape(p *checkpoint.Part) any {
	args := p.Args
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	sub := subagentRef(p.Subagent)
	if p.Result == nil {
		return struct {
			Type       string          `json:"type"`
			ToolCallID string          `json:"toolCallId"`
			ToolName   string          `json:"toolName"`
			Args       json.RawMessage `json:"args"`
			ArgsText   string          `json:"argsText"`
			Subagent   *SubagentRef    `json:"subagent,omitempty"`
		}{p.Type, p.ToolCallID, p.ToolName, args, p.ArgsText, sub}
	}
	return struct {
		Type       string          `json:"type"`
		ToolCallID string          `json:"toolCallId"`
		ToolName   string          `json:"toolName"`
		Args       json.RawMessage `json:"args"`
		ArgsText   string          `json:"argsText"`
		Result     json.RawMessage `json:"result"`
		IsError    bool            `json:"isError"`
		Subagent   *SubagentRef    `json:"subagent,omitempty"`
	}{p.Type, p.ToolCallID, p.ToolName, args, p.ArgsText, p.Result, p.IsError, sub}
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

// AppendParts appends content parts as a JSON array (null when nil). A
// tool-call part without a result that an agent's permission request (a
// thread.PermissionPart data part of the same content) asks about gets
// its approval with the agent's options, in assistant-ui's shape.
func AppendParts(b []byte, parts []checkpoint.Part) []byte {
	perms := permissions(parts)
	if perms == nil {
		return appendArray(b, parts, AppendPart)
	}
	return appendArray(b, parts, func(b []byte, p *checkpoint.Part) []byte {
		a, ok := perms[p.ToolCallID]
		if p.Type != checkpoint.PartToolCall || p.Result != nil || !ok {
			return AppendPart(b, p)
		}
		args := p.Args
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		q, _ := json.Marshal(struct {
			Type       string          `json:"type"`
			ToolCallID string          `json:"toolCallId"`
			ToolName   string          `json:"toolName"`
			Args       json.RawMessage `json:"args"`
			ArgsText   string          `json:"argsText"`
			Approval   *PartApproval   `json:"approval"`
		}{p.Type, p.ToolCallID, p.ToolName, args, p.ArgsText, a}) // strings and valid JSON values: always marshals
		return append(b, q...)
	})
}

// permissions returns the approvals that the permission data parts of
// parts ask for, by call id; nil when there is none (the common case,
// found without allocating).
func permissions(parts []checkpoint.Part) map[string]*PartApproval {
	var out map[string]*PartApproval
	for i := range parts {
		p := &parts[i]
		if p.Type != checkpoint.PartData || p.Name != thread.PermissionPart {
			continue
		}
		id, opts, ok := thread.ReadPermission(p.Data)
		if !ok {
			continue
		}
		a := &PartApproval{ID: id, Options: make([]ApprovalOption, len(opts))}
		for j, o := range opts {
			a.Options[j] = ApprovalOption{ID: o.ID, Kind: strings.ReplaceAll(o.Kind, "_", "-"), Label: o.Name}
		}
		if out == nil {
			out = map[string]*PartApproval{}
		}
		out[id] = a
	}
	return out
}

// AppendStatus appends an assistant message's status.
func AppendStatus(b []byte, s *checkpoint.Status) []byte {
	b = append(b, `{"type":`...)
	b = AppendJSONString(b, s.Type)
	if s.Reason != "" {
		b = append(b, `,"reason":`...)
		b = AppendJSONString(b, s.Reason)
	}
	if s.Error != "" {
		b = append(b, `,"error":`...)
		b = AppendJSONString(b, s.Error)
	}
	return append(b, '}')
}

// AppendAttachments appends a user message's attachments in
// assistant-ui's CompleteAttachment shape (null when nil).
func AppendAttachments(b []byte, as []checkpoint.Attachment) []byte {
	return appendArray(b, as, appendAttachment)
}

func appendAttachment(b []byte, a *checkpoint.Attachment) []byte {
	b = append(b, `{"id":`...)
	b = AppendJSONString(b, a.ID)
	b = append(b, `,"type":`...)
	b = AppendJSONString(b, a.Type)
	b = append(b, `,"name":`...)
	b = AppendJSONString(b, a.Name)
	b = append(b, `,"contentType":`...)
	b = AppendJSONString(b, a.ContentType)
	if a.Size != 0 {
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, a.Size, 10)
	}
	if a.URL != "" {
		b = append(b, `,"url":`...)
		b = AppendJSONString(b, a.URL)
	}
	b = append(b, `,"content":`...)
	b = AppendParts(b, a.Content)
	b = append(b, `,"status":{"type":`...)
	b = AppendJSONString(b, a.Status.Type)
	return append(b, "}}"...)
}

// AppendMessage appends a message in assistant-ui's ThreadMessage shape.
func AppendMessage(b []byte, m *checkpoint.Message) []byte {
	b = append(b, `{"id":"`...)
	b = AppendUUID(b, m.ID)
	b = append(b, `","role":`...)
	b = AppendJSONString(b, string(m.Role))
	b = append(b, `,"content":`...)
	b = AppendParts(b, m.Content)
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
		b = append(b, `,"status":`...)
		b = AppendStatus(b, s)
	}
	if a := m.Attachments; a != nil {
		b = append(b, `,"attachments":`...)
		b = AppendAttachments(b, *a)
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

// AppendMessages appends a message list (null when nil).
func AppendMessages(b []byte, ms []checkpoint.Message) []byte {
	return appendArray(b, ms, AppendMessage)
}

// AppendRepository appends assistant-ui's ExportedMessageRepository.
func AppendRepository(b []byte, r *checkpoint.Repository) []byte {
	b = append(b, `{"headId":`...)
	b = AppendJSONUUID(b, r.HeadID)
	b = append(b, `,"messages":`...)
	b = appendArray(b, r.Messages, func(b []byte, it *checkpoint.RepositoryItem) []byte {
		b = append(b, `{"message":`...)
		b = AppendMessage(b, &it.Message)
		b = append(b, `,"parentId":`...)
		b = AppendJSONUUID(b, it.ParentID)
		return append(b, '}')
	})
	return append(b, '}')
}

// DomainPart is the content part p decodes to.
// An approval is not kept: the permission data part it comes from is.
func (p *Part) DomainPart() checkpoint.Part {
	out := checkpoint.Part{Type: p.Type, Text: p.Text, Image: p.Image, ToolCallID: p.ToolCallID, ToolName: p.ToolName,
		Args: p.Args, ArgsText: p.ArgsText, Result: p.Result, IsError: p.IsError, Name: p.Name, Data: p.Data,
		SourceType: p.SourceType, ID: p.ID, URL: p.URL, Title: p.Title, Filename: p.Filename, MimeType: p.MimeType}
	if s := p.Subagent; s != nil {
		tid, err1 := uuid.Parse(s.ThreadID)
		rid, err2 := uuid.Parse(s.RunID)
		if err1 == nil && err2 == nil {
			out.Subagent = &checkpoint.SubagentRef{ThreadID: tid, RunID: rid}
		}
	}
	return out
}

// DomainParts is DomainPart of each (nil for nil).
func DomainParts(ps []Part) []checkpoint.Part {
	if ps == nil {
		return nil
	}
	out := make([]checkpoint.Part, len(ps))
	for i := range ps {
		out[i] = ps[i].DomainPart()
	}
	return out
}
