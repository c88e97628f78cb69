package builtin_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/threadline/threadline/model/internal/modeltest"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/model/builtin"
	"github.com/threadline/threadline/thread"
)

// The helpers every model test shares (model/internal/modeltest).
var (
	userReq    = modeltest.UserReq
	streamText = modeltest.StreamText
	collect    = modeltest.Collect
)

func isToken(s string) bool {
	if len(s) != 5 || s[0] != ' ' {
		return false
	}
	for i := 1; i < 5; i++ {
		if s[i] < 'a' || s[i] > 'z' {
			return false
		}
	}
	return true
}

func TestBuiltinShapeAndDeterminism(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		tokens int
		prompt string
		call   int64
	}{
		{"default length", 200, "hello there", 1},
		{"one token", 1, "hello there", 1},
		{"zero tokens", 0, "hello there", 1},
		{"long reply", 1000, "a longer prompt that spans blocks", 7},
		{"empty prompt", 10, "", 0},
		{"block boundary", 256, "x", 3},
		{"past block boundary", 257, "x", 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := builtin.NewBuiltin(tc.tokens, 0)
			toks, res, err := collect(t, m, context.Background(), userReq(tc.prompt, tc.call))
			if err != nil {
				t.Fatalf("Stream: got error %v, want nil", err)
			}
			if len(toks) != tc.tokens {
				t.Fatalf("token count: got %d, want %d", len(toks), tc.tokens)
			}
			for i, tok := range toks {
				if !isToken(tok) {
					t.Fatalf("token %d: got %q, want a space and 4 lowercase letters", i, tok)
				}
			}
			if got, want := strings.Join(toks, ""), builtin.BuiltinText(tc.prompt, tc.call, tc.tokens); got != want {
				t.Fatalf("text: got %q, want BuiltinText %q", got, want)
			}
			again, _, _ := collect(t, m, context.Background(), userReq(tc.prompt, tc.call))
			if got, want := strings.Join(again, ""), strings.Join(toks, ""); got != want {
				t.Fatalf("second call: got %q, want the same text %q", got, want)
			}
			if res.Model != "builtin" || res.StopReason != "stop" || res.CompletionTokens != tc.tokens {
				t.Fatalf("result: got %+v, want model builtin, stop, %d completion tokens", res, tc.tokens)
			}
			wantPrompt := (len("be brief") + len("an earlier question") + len("an earlier answer") + len(tc.prompt)) / 4
			if res.PromptTokens != wantPrompt {
				t.Fatalf("prompt tokens: got %d, want %d", res.PromptTokens, wantPrompt)
			}
		})
	}
}

func TestBuiltinVariesWithPromptAndCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		a, b       string
		callA, cB  int64
		wantSameAs bool
	}{
		{"same prompt same call", "hi", "hi", 1, 1, true},
		{"same prompt other call", "hi", "hi", 1, 2, false},
		{"other prompt same call", "hi", "ho", 1, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := builtin.BuiltinText(tc.a, tc.callA, 20), builtin.BuiltinText(tc.b, tc.cB, 20)
			if got := a == b; got != tc.wantSameAs {
				t.Fatalf("texts equal: got %v, want %v (%q vs %q)", got, tc.wantSameAs, a, b)
			}
		})
	}
}

func TestBuiltinUsesLastUserMessage(t *testing.T) {
	t.Parallel()
	req := thread.ModelRequest{Call: 4, Messages: []thread.ModelMessage{
		{Role: checkpoint.RoleUser, Parts: []thread.ModelPart{{Type: "text", Text: "first"}}},
		{Role: checkpoint.RoleAssistant, Parts: []thread.ModelPart{{Type: "text", Text: "reply"}}},
		{Role: checkpoint.RoleUser, Parts: []thread.ModelPart{{Type: "text", Text: "sec"}, {Type: "image", Image: "data:image/png;base64,AAAA"}, {Type: "text", Text: "ond"}}},
	}}
	toks, _, err := collect(t, builtin.NewBuiltin(5, 0), context.Background(), req)
	if err != nil {
		t.Fatalf("Stream: got %v, want nil", err)
	}
	if got, want := strings.Join(toks, ""), builtin.BuiltinText("second", 4, 5); got != want {
		t.Fatalf("text: got %q, want %q (text parts of the last user message joined)", got, want)
	}
}

func TestBuiltinCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		delay time.Duration
	}{
		{"no delay", 0},
		{"with delay", time.Millisecond},
		// A tick is nearly always ready by the time onToken returns:
		// the cancel must still win.
		{"with a tick ready", time.Microsecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			n := 0
			_, err := streamText(builtin.NewBuiltin(1000, tc.delay), ctx, userReq("hi", 1), func(string) error {
				n++
				if n == 5 {
					cancel()
				}
				return nil
			})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("error: got %v, want context.Canceled", err)
			}
			if n != 5 {
				t.Fatalf("tokens after cancel: got %d, want 5", n)
			}
		})
	}
	t.Run("already cancelled", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		toks, _, err := collect(t, builtin.NewBuiltin(10, 0), ctx, userReq("hi", 1))
		if !errors.Is(err, context.Canceled) || len(toks) != 0 {
			t.Fatalf("got %d tokens and %v, want 0 tokens and context.Canceled", len(toks), err)
		}
	})
}

func TestBuiltinDelay(t *testing.T) {
	t.Parallel()
	start := time.Now()
	toks, _, err := collect(t, builtin.NewBuiltin(5, 10*time.Millisecond), context.Background(), userReq("hi", 1))
	if err != nil || len(toks) != 5 {
		t.Fatalf("got %d tokens and %v, want 5 and nil", len(toks), err)
	}
	if got, want := time.Since(start), 45*time.Millisecond; got < want {
		t.Fatalf("elapsed: got %v, want at least %v for 5 tokens at 10ms", got, want)
	}
}

func TestBuiltinOnTokenError(t *testing.T) {
	t.Parallel()
	stop := errors.New("client gone")
	n := 0
	_, err := streamText(builtin.NewBuiltin(10, 0), context.Background(), userReq("hi", 1), func(string) error {
		n++
		return stop
	})
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("got %v after %d tokens, want onToken's error after 1", err, n)
	}
}

func TestBuiltinFail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		prompt   string
		wantCode errcode.Code
	}{
		{"/fail model_error", errcode.ModelError},
		{"/fail model_timeout", errcode.ModelTimeout},
		{"/fail model_auth", errcode.ModelAuth},
		{"/fail model_not_configured please", errcode.ModelNotConfigured},
		{"/fail something else", errcode.ModelError},
	}
	for _, tc := range tests {
		t.Run(tc.prompt, func(t *testing.T) {
			t.Parallel()
			toks, _, err := collect(t, builtin.NewBuiltin(200, 0), context.Background(), userReq(tc.prompt, 2))
			var me *errcode.Error
			if !errors.As(err, &me) || me.Code != tc.wantCode {
				t.Fatalf("error: got %v, want a *errcode.Error with code %s", err, tc.wantCode)
			}
			if len(toks) != 3 {
				t.Fatalf("tokens before failing: got %d, want 3", len(toks))
			}
			if got, want := strings.Join(toks, ""), builtin.BuiltinText(tc.prompt, 2, 3); got != want {
				t.Fatalf("text before failing: got %q, want %q", got, want)
			}
		})
	}
	t.Run("not a prefix", func(t *testing.T) {
		t.Parallel()
		toks, _, err := collect(t, builtin.NewBuiltin(4, 0), context.Background(), userReq("please /fail model_error", 1))
		if err != nil || len(toks) != 4 {
			t.Fatalf("got %d tokens and %v, want 4 tokens and nil", len(toks), err)
		}
	})
}

func TestBuiltinNoAllocsPerToken(t *testing.T) {
	m := builtin.NewBuiltin(256, 0)
	req := userReq("hello", 1)
	ctx := context.Background()
	sink := func(thread.Delta) error { return nil }
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := m.Stream(ctx, req, sink); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Fatalf("allocations per 256-token call: got %v, want at most 1 (the block of tokens)", allocs)
	}
}

func BenchmarkBuiltin(b *testing.B) {
	m := builtin.NewBuiltin(200, 0)
	req := userReq("benchmark prompt", 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	sink := func(d thread.Delta) error { n += len(d.Text); return nil }
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req.Call = int64(i)
		if _, err := m.Stream(ctx, req, sink); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*200)/b.Elapsed().Seconds(), "tokens/s")
}
