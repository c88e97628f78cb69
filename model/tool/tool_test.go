package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/thread"
)

func TestEvaluate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr string
		want string
	}{
		{"12*7", "84"},
		{"  12 * 7 ", "84"},
		{"1+2*3", "7"},
		{"(1+2)*3", "9"},
		{"10/4", "2.5"},
		{"7 % 3", "1"},
		{"-7 % 3", "-1"},
		{"2^10", "1024"},
		{"2**10", "1024"},
		{"2^3^2", "512"},
		{"-2^2", "-4"},
		{"(-2)^2", "4"},
		{"2^-1", "0.5"},
		{"--3", "3"},
		{"+3", "3"},
		{"3 - -3", "6"},
		{"0.1+0.2", "0.3"},
		{".5 + 1.", "1.5"},
		{"1.5e3", "1500"},
		{"2e-3 * 1000", "2"},
		{"((((1))))", "1"},
		{"1/3", "0.333333333333333"},
		{"-0", "0"},
		{"10000000000 * 10000000000", "100000000000000000000"},
		{"1e21 * 10", "1e+22"},
		{"(12.5 + 3) * 4 ^ 2 / -7", "-35.4285714285714"},
	}
	for _, tc := range tests {
		v, err := tool.Evaluate(tc.expr)
		if err != nil {
			t.Errorf("Evaluate(%q): got error %v, want %s", tc.expr, err, tc.want)
			continue
		}
		if got := tool.FormatNumber(v); got != tc.want {
			t.Errorf("Evaluate(%q): got %s, want %s", tc.expr, got, tc.want)
		}
	}
}

func TestEvaluateErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr string
		want string // a piece of the message
	}{
		{"", "empty"},
		{"   ", "empty"},
		{"1/0", "at 2: division by zero"},
		{"1 % (2-2)", "remainder of a division by zero"},
		{"1+", "ends where a number was expected"},
		{"(1+2", "'(' is not closed"},
		{"1+2)", "')' with no '('"},
		{"()", "')' where a number"},
		{"2 3", `unexpected "3"`},
		{"abc", `expected a number, got "abc"`},
		{"1..2", `unexpected ".2"`},
		{"os.Exit(1)", "expected a number"},
		{"1e999", "not a finite number"},
		{"10^400", "not a finite number"},
		{"(-8)^0.5", "not a finite number"},
		{strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300), "nests deeper"},
		{strings.Repeat("-", 300) + "1", "nests deeper"},
		{strings.Repeat("1+", 3000) + "1", "longer than"},
	}
	for _, tc := range tests {
		_, err := tool.Evaluate(tc.expr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Evaluate(%.40q): got error %v, want one containing %q", tc.expr, err, tc.want)
		}
	}
}

func FuzzEvaluate(f *testing.F) {
	for _, s := range []string{"12*7", "(1+2)^-3", "-2^2", "1/0", ".5e-3%2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := tool.Evaluate(s)
		if err == nil && !json.Valid([]byte(tool.FormatNumber(v))) {
			t.Fatalf("Evaluate(%q) = %v, formatted %q is not JSON", s, v, tool.FormatNumber(v))
		}
	})
}

func setup(t *testing.T, now time.Time) *tool.Registry {
	t.Helper()
	r := tool.NewRegistry(time.Second)
	if err := r.Add(tool.Builtins(func() time.Time { return now })...); err != nil {
		t.Fatalf("Add builtins: %v", err)
	}
	return r
}

func call(t *testing.T, r *tool.Registry, name, args string) thread.ToolOutput {
	t.Helper()
	res, err := r.Call(context.Background(), name, json.RawMessage(args))
	if err != nil {
		t.Fatalf("Call(%s, %s): got error %v, want a result", name, args, err)
	}
	return res
}

func TestCalculatorTool(t *testing.T) {
	t.Parallel()
	r := setup(t, time.Now())
	tests := []struct {
		args    string
		want    string
		isError bool
	}{
		{`{"expression":"12*7"}`, `84`, false},
		{`{"expression":"1/0"}`, `"at 2: division by zero"`, true},
		{`{"expression":12}`, `"want {\"expression\": \"\u003carithmetic\u003e\"}"`, true},
		{`{}`, `"want {\"expression\": \"\u003carithmetic\u003e\"}"`, true},
		{`[1]`, ``, true},
		{`"12*7"`, ``, true},
	}
	for _, tc := range tests {
		res := call(t, r, "calculator", tc.args)
		if res.IsError != tc.isError || (tc.want != "" && string(res.Value) != tc.want) {
			t.Errorf("calculator %s: got %s isError=%v, want %s isError=%v", tc.args, res.Value, res.IsError, tc.want, tc.isError)
		}
	}
}

func TestClockTool(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 21, 30, 0, 0, time.UTC)
	r := setup(t, now)
	tests := []struct {
		args    string
		want    tool.ClockResult
		isError bool
	}{
		{`{}`, tool.ClockResult{Time: "2026-11-23T21:30:00Z", Timezone: "UTC", Weekday: "Monday", Unix: now.Unix()}, false},
		{`{"timezone":"utc"}`, tool.ClockResult{Time: "2026-11-23T21:30:00Z", Timezone: "UTC", Weekday: "Monday", Unix: now.Unix()}, false},
		{`{"timezone":"Europe/Paris"}`, tool.ClockResult{Time: "2026-11-23T22:30:00+01:00", Timezone: "Europe/Paris", Weekday: "Monday", Unix: now.Unix()}, false},
		{`{"timezone":"Asia/Tokyo"}`, tool.ClockResult{Time: "2026-11-24T06:30:00+09:00", Timezone: "Asia/Tokyo", Weekday: "Tuesday", Unix: now.Unix()}, false},
		{`{"timezone":"Mars/Olympus"}`, tool.ClockResult{}, true},
		{`{"timezone":"../../etc/passwd"}`, tool.ClockResult{}, true},
		{`{"timezone":"Local"}`, tool.ClockResult{}, true},
	}
	for _, tc := range tests {
		res := call(t, r, "clock", tc.args)
		if res.IsError != tc.isError {
			t.Errorf("clock %s: got %s isError=%v, want isError=%v", tc.args, res.Value, res.IsError, tc.isError)
			continue
		}
		if tc.isError {
			continue
		}
		var got tool.ClockResult
		if err := json.Unmarshal(res.Value, &got); err != nil || got != tc.want {
			t.Errorf("clock %s: got %s (%v), want %+v", tc.args, res.Value, err, tc.want)
		}
	}
}

func TestRegistrySpecs(t *testing.T) {
	t.Parallel()
	r := setup(t, time.Now())
	specs := r.Specs()
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
		var schema map[string]any
		if err := json.Unmarshal(s.Parameters, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s: parameters %s: got %v, want an object schema", s.Name, s.Parameters, err)
		}
		if s.Description == "" || s.Approval {
			t.Errorf("%s: got description %q approval %v, want a description and no approval", s.Name, s.Description, s.Approval)
		}
	}
	if got, want := strings.Join(names, ","), "calculator,clock,wait"; got != want {
		t.Errorf("Specs names: got %s, want %s", got, want)
	}
}

func TestRegistryAddRefuses(t *testing.T) {
	t.Parallel()
	r := setup(t, time.Now())
	tests := []struct {
		name string
		tool tool.Tool
	}{
		{"duplicate", tool.Calculator{}},
		{"dot in name", fake{spec: thread.ToolSpec{Name: "srv.tool", Parameters: json.RawMessage(`{}`)}}},
		{"empty name", fake{spec: thread.ToolSpec{Parameters: json.RawMessage(`{}`)}}},
		{"long name", fake{spec: thread.ToolSpec{Name: strings.Repeat("a", 65), Parameters: json.RawMessage(`{}`)}}},
		{"no parameters", fake{spec: thread.ToolSpec{Name: "x"}}},
		{"array parameters", fake{spec: thread.ToolSpec{Name: "x", Parameters: json.RawMessage(`[]`)}}},
	}
	for _, tc := range tests {
		if err := r.Add(tc.tool); errcode.Of(err) != errcode.Invalid {
			t.Errorf("%s: Add got %v, want invalid_request", tc.name, err)
		}
	}
	// Two tools of one name in a single Add: neither is added.
	a := fake{spec: thread.ToolSpec{Name: "same", Parameters: json.RawMessage(`{}`)}}
	if err := r.Add(a, a); err == nil {
		t.Errorf("Add(a, a): got nil, want an error")
	}
	if _, ok := r.Get("same"); ok {
		t.Errorf("Get(same) after a refused Add: got a tool, want none")
	}
}

// fake is a tool whose call runs fn.
type fake struct {
	spec    thread.ToolSpec
	timeout time.Duration
	fn      func(ctx context.Context, args json.RawMessage) (thread.ToolOutput, error)
}

func (f fake) Spec() thread.ToolSpec { return f.spec }
func (f fake) Timeout() time.Duration {
	return f.timeout
}
func (f fake) Call(ctx context.Context, args json.RawMessage) (thread.ToolOutput, error) {
	return f.fn(ctx, args)
}

func TestRegistryCallFailures(t *testing.T) {
	t.Parallel()
	r := tool.NewRegistry(50 * time.Millisecond)
	obj := json.RawMessage(`{"type":"object"}`)
	block := func(ctx context.Context, _ json.RawMessage) (thread.ToolOutput, error) {
		<-ctx.Done()
		return thread.ToolOutput{}, ctx.Err()
	}
	err := r.Add(
		fake{spec: thread.ToolSpec{Name: "block", Parameters: obj}, fn: block},
		fake{spec: thread.ToolSpec{Name: "block_long", Parameters: obj}, timeout: time.Hour, fn: block},
		fake{spec: thread.ToolSpec{Name: "boom", Parameters: obj}, fn: func(context.Context, json.RawMessage) (thread.ToolOutput, error) { panic("kaput") }},
		fake{spec: thread.ToolSpec{Name: "broken", Parameters: obj}, fn: func(context.Context, json.RawMessage) (thread.ToolOutput, error) {
			return thread.ToolOutput{}, errors.New("connection refused")
		}},
		fake{spec: thread.ToolSpec{Name: "garbage", Parameters: obj}, fn: func(context.Context, json.RawMessage) (thread.ToolOutput, error) {
			return thread.ToolOutput{Value: json.RawMessage(`{oops`)}, nil
		}},
		fake{spec: thread.ToolSpec{Name: "echo", Parameters: obj}, fn: func(_ context.Context, args json.RawMessage) (thread.ToolOutput, error) {
			return thread.ToolOutput{Value: args}, nil
		}},
	)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, args string
		want       string
		isError    bool
	}{
		{"nope", `{}`, `"there is no tool \"nope\""`, true},
		{"block", `{}`, `"block timed out after 50ms"`, true},
		{"boom", `{}`, `"boom failed: kaput"`, true},
		{"broken", `{}`, `"connection refused"`, true},
		{"garbage", `{}`, `"garbage answered something that is not JSON"`, true},
		{"echo", `[1,2]`, `"the arguments of echo must be a JSON object, got [1,2]"`, true},
		{"echo", `not json`, `"the arguments of echo must be a JSON object, got not json"`, true},
		{"echo", ``, `{}`, false},
		{"echo", `{"a":1}`, `{"a":1}`, false},
	}
	for _, tc := range tests {
		res := call(t, r, tc.name, tc.args)
		if string(res.Value) != tc.want || res.IsError != tc.isError {
			t.Errorf("Call(%s, %s): got %s isError=%v, want %s isError=%v", tc.name, tc.args, res.Value, res.IsError, tc.want, tc.isError)
		}
	}

	// Cancelling the caller's context stops a tool whose own timeout is an
	// hour, and Call reports the cancellation as an error.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.Call(ctx, "block_long", json.RawMessage(`{}`))
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Call on a cancelled context: got %v, want context.Canceled", err)
	}
}

func TestWaitTool(t *testing.T) {
	t.Parallel()
	r := setup(t, time.Now())
	if res := call(t, r, "wait", `{"seconds":0.01}`); res.IsError || string(res.Value) != `{"waited_seconds":0.01}` {
		t.Errorf("wait 0.01: got %s isError=%v, want {\"waited_seconds\":0.01}", res.Value, res.IsError)
	}
	for _, args := range []string{`{"seconds":61}`, `{"seconds":-1}`, `{"seconds":1e300}`, `{}`} {
		if res := call(t, r, "wait", args); !res.IsError {
			t.Errorf("wait %s: got %s, want an isError result", args, res.Value)
		}
	}
	// wait has a timeout of its own, longer than the registry's second.
	if got := (tool.Wait{}).Timeout(); got <= tool.MaxWait {
		t.Errorf("Wait.Timeout: got %v, want more than %v", got, tool.MaxWait)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.Call(ctx, "wait", json.RawMessage(`{"seconds":60}`))
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: got %v, want context.Canceled", err)
	}
}

func TestNeedApproval(t *testing.T) {
	t.Parallel()
	r := tool.NewRegistry(0)
	if err := r.Add(tool.NeedApproval(tool.Wait{})); err != nil {
		t.Fatal(err)
	}
	w, _ := r.Get("wait")
	if !w.Spec().Approval || r.Specs()[0].Approval != true {
		t.Errorf("NeedApproval(wait).Spec().Approval: got false, want true")
	}
	if tt, ok := w.(tool.Timeouter); !ok || tt.Timeout() != (tool.Wait{}).Timeout() {
		t.Errorf("NeedApproval(wait): lost the tool's own timeout")
	}
}
