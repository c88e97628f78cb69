package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/threadline/threadline/store/pgtest"
)

// TestBenchAgentSmall runs the bench on a few runs and checks what it
// reports: every run measured, each tool step seen between two model
// calls, and a tool step storing bytes of its own.
func TestBenchAgentSmall(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.New(t) // any database on the server: the bench creates its own
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"--database-url", dbURL, "--runs", "3", "--warmup", "1", "--steps", "2", "--tokens", "5"}
	if err := Run(ctx, args, func(string) string { return "" }, &stdout, &stderr); err != nil {
		t.Fatalf("bench agent: got error %v, want none; stderr:\n%s", err, stderr.String())
	}
	var res Result
	line := strings.TrimSpace(stdout.String())
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		t.Fatalf("stdout: got %q, want one JSON object (%v)", line, err)
	}
	if res.Runs != 3 || res.Steps != 2 || res.TokensPerStep != 5 {
		t.Errorf("runs, steps, tokens: got %d, %d, %d, want 3, 2, 5", res.Runs, res.Steps, res.TokensPerStep)
	}
	for name, v := range map[string]float64{
		"step_overhead_p50_ms": res.StepOverheadP50MS, "step_overhead_p99_ms": res.StepOverheadP99MS,
		"agent_tokens_per_s": res.AgentTokensPerS, "plain_tokens_per_s": res.PlainTokensPerS,
		"bytes_per_tool_step": res.BytesPerToolStep,
	} {
		if v <= 0 {
			t.Errorf("%s: got %v, want > 0", name, v)
		}
	}
	if res.AgentBytesPerRun <= res.PlainBytesPerRun {
		t.Errorf("bytes per run: agent %v, plain %v; want the agent run's tool steps to store more", res.AgentBytesPerRun, res.PlainBytesPerRun)
	}
	if !strings.Contains(stderr.String(), "dropped") {
		t.Errorf("stderr: got %q, want the bench's database dropped", stderr.String())
	}
}

func TestBenchAgentFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--runs", "0"}, {"--steps", "0"}, {"--tokens", "-1"}, {"--warmup", "-1"}, {"--nope"}} {
		var stdout, stderr bytes.Buffer
		if err := Run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); err == nil {
			t.Errorf("%v: got no error, want one", args)
		}
	}
}

// TestGaps pairs each tool return with the next step's start.
func TestGaps(t *testing.T) {
	t.Parallel()
	m := newMarks()
	t0 := time.Unix(0, 0)
	m.steps["k"] = []time.Time{t0, t0.Add(10 * time.Millisecond), t0.Add(30 * time.Millisecond)}
	m.tools["k"] = []time.Time{t0.Add(8 * time.Millisecond), t0.Add(25 * time.Millisecond)}
	got := m.gaps("k")
	want := []time.Duration{2 * time.Millisecond, 5 * time.Millisecond}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("gaps: got %v, want %v", got, want)
	}
}
