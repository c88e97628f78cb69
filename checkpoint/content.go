package checkpoint

import "encoding/json"

// Content parts are stored (the checkpoints.content column, which the
// search functions read) and exported in assistant-ui's part shape, the
// one Part.MarshalJSON writes. The API writes its own copy of the shape
// (api/wire); the two are held to the same bytes by golden files.

// MarshalParts encodes content parts for storage, as encoding/json does.
func MarshalParts(p []Part) []byte {
	if p == nil {
		return []byte("null")
	}
	b := []byte{'['}
	for i := range p {
		if i > 0 {
			b = append(b, ',')
		}
		b = p[i].appendJSON(b)
	}
	return append(b, ']')
}

func (p *Part) appendJSON(b []byte) []byte {
	switch p.Type {
	case PartText, PartReasoning:
		b = append(b, `{"type":"`...)
		b = append(b, p.Type...)
		b = append(b, `","text":`...)
		return append(appendString(b, p.Text), '}')
	case PartImage:
		b = append(b, `{"type":"image","image":`...)
		return append(appendString(b, p.Image), '}')
	}
	q, _ := json.Marshal(*p) // plain strings: always marshals
	return append(b, q...)
}

// appendString appends s as a JSON string: plain printable ASCII quoted
// here, anything else by encoding/json, so the escaping is its own.
func appendString(b []byte, s string) []byte {
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
