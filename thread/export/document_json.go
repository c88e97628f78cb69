package export

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/checkpoint"
)

// A checkpoint's parts, status and attachments are written in the API's
// message shapes (api/wire): the domain values carry no JSON.

// checkpointJSON is Checkpoint as the document holds it.
type checkpointJSON struct {
	ID          uuid.UUID           `json:"id"`
	ParentID    *uuid.UUID          `json:"parent_id"`
	Seq         int64               `json:"seq"`
	Role        checkpoint.Role     `json:"role"`
	Content     json.RawMessage     `json:"content"`
	Status      *wire.MessageStatus `json:"status,omitempty"`
	Attachments []attachmentJSON    `json:"attachments,omitempty"`
	RunID       *uuid.UUID          `json:"run_id"`
	CreatedAt   time.Time           `json:"created_at"`
}

// attachmentJSON is Attachment as the document holds it.
type attachmentJSON struct {
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
	Data []byte `json:"data,omitempty"`
}

// MarshalJSON writes the checkpoint in the document's shape.
func (c Checkpoint) MarshalJSON() ([]byte, error) {
	o := checkpointJSON{ID: c.ID, ParentID: c.ParentID, Seq: c.Seq, Role: c.Role, Content: wire.AppendParts(nil, c.Content), RunID: c.RunID,
		CreatedAt: c.CreatedAt}
	if s := c.Status; s != nil {
		o.Status = &wire.MessageStatus{Type: s.Type, Reason: s.Reason, Error: s.Error}
	}
	for _, a := range c.Attachments {
		aj := attachmentJSON{ID: a.ID, Type: a.Type, Name: a.Name, ContentType: a.ContentType, Size: a.Size, URL: a.URL,
			Content: wire.AppendParts(nil, a.Content), Data: a.Data}
		aj.Status.Type = a.Status.Type
		o.Attachments = append(o.Attachments, aj)
	}
	return json.Marshal(o)
}

// UnmarshalJSON reads a checkpoint of a document.
func (c *Checkpoint) UnmarshalJSON(b []byte) error {
	var o struct {
		checkpointJSON
		Content     []wire.Part `json:"content"`
		Attachments []struct {
			attachmentJSON
			Content []wire.Part `json:"content"`
		} `json:"attachments"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	*c = Checkpoint{ID: o.ID, ParentID: o.ParentID, Seq: o.Seq, Role: o.Role, Content: wire.DomainParts(o.Content), RunID: o.RunID,
		CreatedAt: o.CreatedAt}
	if s := o.Status; s != nil {
		c.Status = &checkpoint.Status{Type: s.Type, Reason: s.Reason, Error: s.Error}
	}
	for _, a := range o.Attachments {
		da := Attachment{Attachment: checkpoint.Attachment{ID: a.ID, Type: a.Type, Name: a.Name, ContentType: a.ContentType, Size: a.Size,
			URL: a.URL, Content: wire.DomainParts(a.Content)}, Data: a.Data}
		da.Status.Type = a.attachmentJSON.Status.Type
		c.Attachments = append(c.Attachments, da)
	}
	return nil
}
