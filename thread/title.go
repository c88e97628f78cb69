package thread

import (
	"strings"
)

// TitleFrom returns the first words of text, at most 60 characters.
func TitleFrom(text string) string {
	words := strings.Fields(text)
	var b strings.Builder
	for _, w := range words {
		if b.Len()+len(w)+1 > 60 {
			break
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	if b.Len() == 0 && len(words) > 0 {
		r := []rune(words[0])
		return string(r[:min(len(r), 60)])
	}
	return b.String()
}
