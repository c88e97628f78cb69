package thread

import (
	"strings"
	"unicode/utf8"
)

// storable returns s as a Postgres text or jsonb value can hold it: every
// U+0000 (which neither can hold: 22P05) and every byte that is not UTF-8
// becomes U+FFFD. A model reply, a provider's error message or a model name
// goes through it before it reaches the log, a stream or the store, so the
// text a client saw live is the text stored, and no write fails on it.
// Each token is cleaned on its own: a provider's token is a JSON string,
// whole runes, so no rune is split across two.
func storable(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
