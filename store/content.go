package store

// The storage codec of checkpoint rows: content parts, status and
// attachments as the checkpoints columns hold them (jsonb), in
// assistant-ui's part shape. The search functions read the content's
// field names ("type", "text"), so these bytes are a storage format: the
// API writes its own copy of the shape (api/wire), and golden files hold
// the two to the same bytes.

import (
	"encoding/json"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
)

// storedPart is a content part as stored, every field of every type.
type storedPart struct {
	Type  string `json:"type"`
	Text  string `json:"text,omitempty"`
	Image string `json:"image,omitempty"`

	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`
	ArgsText   string          `json:"argsText,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	IsError    bool            `json:"isError,omitempty"`

	Name string          `json:"name,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`

	SourceType string `json:"sourceType,omitempty"`
	ID         string `json:"id,omitempty"`
	URL        string `json:"url,omitempty"`
	Title      string `json:"title,omitempty"`

	Filename string `json:"filename,omitempty"`
	MimeType string `json:"mimeType,omitempty"`

	Subagent *storedSubagent `json:"subagent,omitempty"`
}

// storedSubagent is a delegate call part's child thread and run.
type storedSubagent struct {
	ThreadID uuid.UUID `json:"thread_id"`
	RunID    uuid.UUID `json:"run_id"`
}

// unmarshalParts decodes stored parts.
func unmarshalParts(b []byte) ([]checkpoint.Part, error) {
	var sp []storedPart
	if err := json.Unmarshal(b, &sp); err != nil {
		return nil, err
	}
	if sp == nil {
		return nil, nil
	}
	out := make([]checkpoint.Part, len(sp))
	for i := range sp {
		p := sp[i]
		out[i] = checkpoint.Part{Type: p.Type, Text: p.Text, Image: p.Image, ToolCallID: p.ToolCallID, ToolName: p.ToolName,
			Args: p.Args, ArgsText: p.ArgsText, Result: p.Result, IsError: p.IsError, Name: p.Name, Data: p.Data,
			SourceType: p.SourceType, ID: p.ID, URL: p.URL, Title: p.Title, Filename: p.Filename, MimeType: p.MimeType}
		if p.Subagent != nil {
			out[i].Subagent = &checkpoint.SubagentRef{ThreadID: p.Subagent.ThreadID, RunID: p.Subagent.RunID}
		}
	}
	return out, nil
}

// marshalParts encodes content parts for storage, as encoding/json
// encodes each type's shape.
func marshalParts(p []checkpoint.Part) []byte {
	if p == nil {
		return []byte("null")
	}
	var b []byte
	b = append(b, '[')
	for i := range p {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendPart(b, &p[i])
	}
	return append(b, ']')
}

// appendPart appends a part in its type's shape: a text or reasoning part
// with its text even when empty, an image part with its image, a tool-call
// part with its args ({} until they parse) and argsText, and its result
// and isError once it has a result.
func appendPart(b []byte, p *checkpoint.Part) []byte {
	switch p.Type {
	case checkpoint.PartText:
		b = append(b, `{"type":"text","text":`...)
		return append(appendJSONString(b, p.Text), '}')
	case checkpoint.PartReasoning:
		b = append(b, `{"type":"reasoning","text":`...)
		return append(appendJSONString(b, p.Text), '}')
	case checkpoint.PartImage:
		b = append(b, `{"type":"image","image":`...)
		return append(appendJSONString(b, p.Image), '}')
	}
	q, _ := json.Marshal(partShape(p)) // strings and valid JSON values: always marshals
	return append(b, q...)
}

// partShape is the value encoding/json writes for a part that is not text,
// reasoning or an image.
func partShape(p *checkpoint.Part) any {
	switch p.Type {
	case checkpoint.PartToolCall:
		args := p.Args
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		var sub *storedSubagent
		if p.Subagent != nil {
			sub = &storedSubagent{p.Subagent.ThreadID, p.Subagent.RunID}
		}
		if p.Result == nil {
			return struct {
				Type       string          `json:"type"`
				ToolCallID string          `json:"toolCallId"`
				ToolName   string          `json:"toolName"`
				Args       json.RawMessage `json:"args"`
				ArgsText   string          `json:"argsText"`
				Subagent   *storedSubagent `json:"subagent,omitempty"`
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
			Subagent   *storedSubagent `json:"subagent,omitempty"`
		}{p.Type, p.ToolCallID, p.ToolName, args, p.ArgsText, p.Result, p.IsError, sub}
	case checkpoint.PartData:
		return struct {
			Type string          `json:"type"`
			Name string          `json:"name"`
			Data json.RawMessage `json:"data"`
		}{p.Type, p.Name, orNull(p.Data)}
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
		}{p.Type, p.Filename, p.MimeType, orNull(p.Data)}
	}
	return &storedPart{Type: p.Type, Text: p.Text, Image: p.Image, ToolCallID: p.ToolCallID, ToolName: p.ToolName,
		Args: p.Args, ArgsText: p.ArgsText, Result: p.Result, IsError: p.IsError, Name: p.Name, Data: p.Data,
		SourceType: p.SourceType, ID: p.ID, URL: p.URL, Title: p.Title, Filename: p.Filename, MimeType: p.MimeType}
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage(`null`)
	}
	return b
}

// appendJSONString appends s as a JSON string: plain printable ASCII quoted
// here, anything else by encoding/json, so the escaping is its own.
func appendJSONString(b []byte, s string) []byte {
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

// storedStatus is an assistant message's status as stored.
type storedStatus struct {
	Type   string `json:"type"`
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

func marshalStatus(s *checkpoint.Status) []byte {
	b, _ := json.Marshal((*storedStatus)(s)) // strings: always marshals
	return b
}

func unmarshalStatus(b []byte) (*checkpoint.Status, error) {
	st := new(checkpoint.Status)
	if err := json.Unmarshal(b, (*storedStatus)(st)); err != nil {
		return nil, err
	}
	return st, nil
}

// storedAttachment is a user message's attachment as stored; its content
// is parts as marshalParts writes them.
type storedAttachment struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	ContentType string          `json:"contentType"`
	Size        int64           `json:"size,omitempty"`
	URL         string          `json:"url,omitempty"`
	Content     json.RawMessage `json:"content"`
	Status      struct {
		Type string `json:"type"`
	} `json:"status"`
}

func marshalAttachments(as []checkpoint.Attachment) []byte {
	out := make([]storedAttachment, len(as))
	for i, a := range as {
		out[i] = storedAttachment{ID: a.ID, Type: a.Type, Name: a.Name, ContentType: a.ContentType, Size: a.Size, URL: a.URL,
			Content: marshalParts(a.Content)}
		out[i].Status.Type = a.Status.Type
	}
	b, _ := json.Marshal(out) // strings and valid JSON: always marshals
	return b
}

func unmarshalAttachments(b []byte) ([]checkpoint.Attachment, error) {
	var sa []storedAttachment
	if err := json.Unmarshal(b, &sa); err != nil {
		return nil, err
	}
	if sa == nil {
		return nil, nil
	}
	out := make([]checkpoint.Attachment, len(sa))
	for i, a := range sa {
		out[i] = checkpoint.Attachment{ID: a.ID, Type: a.Type, Name: a.Name, ContentType: a.ContentType, Size: a.Size, URL: a.URL}
		out[i].Status.Type = a.Status.Type
		if len(a.Content) > 0 {
			parts, err := unmarshalParts(a.Content)
			if err != nil {
				return nil, err
			}
			out[i].Content = parts
		}
	}
	return out, nil
}
