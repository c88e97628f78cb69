package acp

import (
	"strings"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/threadline/threadline/thread"
)

// promptBlocks is the prompt of a run: the branch's earlier messages
// replayed as one text block (the system message, then each message with
// its role; an assistant turn's tool calls as one line each with their
// result), then the message answered, its text and images as blocks.
func promptBlocks(msgs []thread.ModelMessage) []sdk.ContentBlock {
	if len(msgs) == 0 {
		return []sdk.ContentBlock{sdk.TextBlock("")}
	}
	last := msgs[len(msgs)-1]
	var out []sdk.ContentBlock
	if len(msgs) > 1 {
		var b strings.Builder
		b.WriteString("The conversation so far, replayed by the client:\n")
		for _, m := range msgs[:len(msgs)-1] {
			b.WriteString("\n[" + string(m.Role) + "]\n")
			writeParts(&b, m.Parts)
		}
		b.WriteString("\nThe message to answer follows.")
		out = append(out, sdk.TextBlock(b.String()))
	}
	for _, p := range last.Parts {
		switch p.Type {
		case thread.PartImage:
			if mime, data, ok := dataURL(p.Image); ok {
				out = append(out, sdk.ImageBlock(data, mime))
			}
		case thread.PartText, "":
			if p.Text != "" {
				out = append(out, sdk.TextBlock(p.Text))
			}
		}
	}
	for _, a := range last.Attachments {
		out = append(out, sdk.TextBlock("(attached: "+a.Name+")"))
	}
	if len(out) == 0 {
		out = append(out, sdk.TextBlock(""))
	}
	return out
}

// writeParts writes a replayed message's parts as text.
func writeParts(b *strings.Builder, parts []thread.ModelPart) {
	for _, p := range parts {
		switch {
		case p.Type == thread.PartToolCall && p.Call != nil:
			res := "no result"
			if p.Call.Result != nil {
				res = clip(p.Call.Result, 500)
			}
			if p.Call.IsError {
				res = "error: " + res
			}
			b.WriteString("(tool call " + p.Call.Name + " " + clip([]byte(p.Call.ArgsText), 300) + " -> " + res + ")\n")
		case p.Type == thread.PartImage:
			b.WriteString("(an image)\n")
		case p.Type == thread.PartReasoning:
		case p.Text != "":
			b.WriteString(p.Text + "\n")
		}
	}
}

// dataURL splits a base64 data: URL into its type and data.
func dataURL(u string) (mime, data string, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", "", false
	}
	head, data, found := strings.Cut(rest, ",")
	if !found || !strings.HasSuffix(head, ";base64") {
		return "", "", false
	}
	return strings.TrimSuffix(head, ";base64"), data, true
}
