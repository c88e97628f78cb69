package client

import "encoding/json"

// DecodeEventHead decodes one stream line into ev as json.Unmarshal would,
// except that a snapshot's Messages are left out and its Repository holds
// only HeadID: for a client that follows runs by their sequences, tokens,
// status and head (a load generator, a benchmark), which should not pay
// for decoding a whole tree at every snapshot. ev.Raw is line. It returns
// json.Unmarshal's error for a line that is not an event.
func DecodeEventHead(line []byte, ev *Event) error {
	type Fields Event // Event's fields, without its methods
	var v struct {
		*Fields
		Messages   json.RawMessage `json:"messages,omitempty"`
		Repository *struct {
			HeadID *string `json:"headId"`
		} `json:"messageRepository,omitempty"`
	}
	*ev = Event{}
	v.Fields = (*Fields)(ev)
	if err := json.Unmarshal(line, &v); err != nil {
		return err
	}
	if v.Repository != nil {
		ev.Repository = &Repository{HeadID: v.Repository.HeadID}
	}
	ev.Raw = line
	return nil
}
