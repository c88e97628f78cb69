package thread

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Storable returns s as a Postgres text or jsonb value can hold it: every
// U+0000 (which neither can hold: 22P05) and every byte that is not UTF-8
// becomes U+FFFD. A model reply, a provider's error message or a model name
// goes through it before it reaches the log, a stream or the store, so the
// text a client saw live is the text stored, and no write fails on it.
// Each token is cleaned on its own: a provider's token is a JSON string,
// whole runes, so no rune is split across two.
func Storable(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

func JSONString(b []byte) json.RawMessage {
	q, _ := json.Marshal(Storable(string(b))) // a string always marshals
	return q
}

// StorableJSON returns v as a jsonb value can hold it: a JSON value
// whose strings have no U+0000 (see storable); a value that is not JSON
// becomes a JSON string of its text, and an empty one null.
func StorableJSON(v json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(v)) == 0 {
		return json.RawMessage(`null`)
	}
	if !json.Valid(v) {
		return JSONString(v)
	}
	if !bytes.Contains(v, []byte(`\u0000`)) && utf8.Valid(v) {
		return v
	}
	var x any
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	if dec.Decode(&x) != nil {
		return JSONString(v)
	}
	b, err := json.Marshal(cleanJSON(x))
	if err != nil {
		return JSONString(v)
	}
	return b
}

func cleanJSON(x any) any {
	switch v := x.(type) {
	case string:
		return Storable(v)
	case []any:
		for i := range v {
			v[i] = cleanJSON(v[i])
		}
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[Storable(k)] = cleanJSON(e)
		}
		return out
	}
	return x
}
