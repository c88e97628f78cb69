// Package modeltest holds what the tests of model/ and its children share:
// a chat request and the text of a reply. Only tests import it.
package modeltest

import (
	"context"
	"testing"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// UserReq is a chat request with a system prompt, one earlier exchange and
// text as the message being answered.
func UserReq(text string, call int64) thread.ModelRequest {
	return thread.ModelRequest{Call: call, Messages: []thread.ModelMessage{
		{Role: checkpoint.RoleSystem, Parts: []thread.ModelPart{{Type: "text", Text: "be brief"}}},
		{Role: checkpoint.RoleUser, Parts: []thread.ModelPart{{Type: "text", Text: "an earlier question"}}},
		{Role: checkpoint.RoleAssistant, Parts: []thread.ModelPart{{Type: "text", Text: "an earlier answer"}}},
		{Role: checkpoint.RoleUser, Parts: []thread.ModelPart{{Type: "text", Text: text}}},
	}}
}

// StreamText calls m as a chat call does: the text deltas reach on, other
// deltas are dropped. It returns what m.Stream returns.
func StreamText(m thread.Model, ctx context.Context, req thread.ModelRequest, on func(string) error) (thread.ModelResult, error) {
	return m.Stream(ctx, req, TextOf(on))
}

// TextOf passes the text deltas of a reply to on.
func TextOf(on func(string) error) func(thread.Delta) error {
	return func(d thread.Delta) error {
		if d.Kind != thread.DeltaText || d.Text == "" {
			return nil
		}
		return on(d.Text)
	}
}

// Collect streams req through m and returns the text tokens in order with
// what m.Stream returns.
func Collect(t testing.TB, m thread.Model, ctx context.Context, req thread.ModelRequest) ([]string, thread.ModelResult, error) {
	t.Helper()
	var toks []string
	res, err := StreamText(m, ctx, req, func(s string) error {
		toks = append(toks, s)
		return nil
	})
	return toks, res, err
}
