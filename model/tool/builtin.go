package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // IANA zones on machines without a zoneinfo database

	"github.com/threadline/threadline/thread"
)

// Builtins returns the built-in tools: calculator, clock (reading now,
// time.Now when nil) and wait.
func Builtins(now func() time.Time) []Tool {
	return []Tool{Calculator{}, NewClock(now), Wait{}}
}

// Clock tells the current time, in UTC or in an IANA time zone.
type Clock struct {
	now func() time.Time
}

// NewClock returns the clock tool reading now (time.Now when nil).
func NewClock(now func() time.Time) *Clock {
	if now == nil {
		now = time.Now
	}
	return &Clock{now: now}
}

var clockSpec = thread.ToolSpec{
	Name:        "clock",
	Description: "Tells the current date and time, in UTC or in the IANA time zone given (e.g. Europe/Paris).",
	Parameters: json.RawMessage(`{"type":"object","properties":{"timezone":{"type":"string",` +
		`"description":"an IANA time zone such as America/New_York; UTC when omitted"}},"additionalProperties":false}`),
}

// Spec implements Tool.
func (*Clock) Spec() thread.ToolSpec { return clockSpec }

// ClockResult is what the clock answers.
type ClockResult struct {
	Time     string `json:"time"` // RFC 3339 with the zone's offset
	Timezone string `json:"timezone"`
	Weekday  string `json:"weekday"`
	Unix     int64  `json:"unix"`
}

// Call implements Tool: args is {} or {"timezone": "Europe/Paris"}. An
// unknown zone is an IsError result.
func (c *Clock) Call(_ context.Context, args json.RawMessage) (thread.ToolOutput, error) {
	var in struct {
		Timezone string `json:"timezone"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return ErrorResult(`want {} or {"timezone": "<IANA zone>"}`), nil
	}
	zone := strings.TrimSpace(in.Timezone)
	loc := time.UTC
	if zone != "" && !strings.EqualFold(zone, "UTC") {
		l, err := time.LoadLocation(zone)
		if err != nil || zone == "Local" {
			return ErrorResult(fmt.Sprintf("unknown time zone %q; use an IANA name such as Europe/Paris", zone)), nil
		}
		loc = l
	}
	t := c.now().In(loc)
	return ValueResult(ClockResult{Time: t.Format(time.RFC3339), Timezone: loc.String(), Weekday: t.Weekday().String(), Unix: t.Unix()}), nil
}

// Wait waits the given number of seconds (at most MaxWait) and says how
// long it waited: a long-running call for demos and tests of a running
// tool, its cancellation and its timeout.
type Wait struct{}

// MaxWait is the longest a wait call may ask for.
const MaxWait = 60 * time.Second

var waitSpec = thread.ToolSpec{
	Name:        "wait",
	Description: "Waits the given number of seconds (at most 60), then says how long it waited. For trying out long-running tool calls.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"seconds":{"type":"number","minimum":0,"maximum":60,` +
		`"description":"how long to wait"}},"required":["seconds"],"additionalProperties":false}`),
}

// Spec implements Tool.
func (Wait) Spec() thread.ToolSpec { return waitSpec }

// Timeout implements Timeouter: a wait may take its longest plus a margin.
func (Wait) Timeout() time.Duration { return MaxWait + 5*time.Second }

// Call implements Tool: args is {"seconds": n}. It returns ctx's error
// when ctx ends first.
func (Wait) Call(ctx context.Context, args json.RawMessage) (thread.ToolOutput, error) {
	var in struct {
		Seconds *float64 `json:"seconds"`
	}
	if err := json.Unmarshal(args, &in); err != nil || in.Seconds == nil {
		return ErrorResult(`want {"seconds": <0 to 60>}`), nil
	}
	if *in.Seconds < 0 || *in.Seconds > MaxWait.Seconds() {
		return ErrorResult("seconds must be between 0 and 60"), nil
	}
	t := time.NewTimer(time.Duration(*in.Seconds * float64(time.Second)))
	defer t.Stop()
	select {
	case <-t.C:
		return ValueResult(map[string]any{"waited_seconds": *in.Seconds}), nil
	case <-ctx.Done():
		return thread.ToolOutput{}, ctx.Err()
	}
}
