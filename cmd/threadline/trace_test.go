package main

import (
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/threadline/threadline/store/pgtest"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes every export
// request's protobuf body and keeps its spans with their resources.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	res   []map[string]string // each export's resource attributes
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusNotFound)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	var req collectorpb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		o.res = append(o.res, attrs(rs.GetResource().GetAttributes()))
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// attrs is OTLP attributes as strings (an array as its JSON).
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_ArrayValue:
			var vals []string
			for _, e := range v.ArrayValue.GetValues() {
				vals = append(vals, e.GetStringValue())
			}
			b, _ := json.Marshal(vals)
			out[kv.Key] = string(b)
		case *commonpb.AnyValue_IntValue:
			out[kv.Key] = strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_StringValue:
			out[kv.Key] = v.StringValue
		}
	}
	return out
}

// TestTracesOverOTLP runs the real server with OTEL_EXPORTER_OTLP_ENDPOINT
// at a local receiver and the batch delay longer than the test, makes a
// demo agent run that calls calculator and clock in one step, stops the
// server with SIGTERM and finds the run's spans, sent by the shutdown's
// flush: invoke_agent, a chat span per step, the two tool calls as
// siblings under the first step, with their GenAI attributes and the
// resource from the environment.
func TestTracesOverOTLP(t *testing.T) {
	t.Parallel()
	recv := &otlpReceiver{}
	hs := httptest.NewServer(recv)
	t.Cleanup(hs.Close)
	s := startServer(t, pgtest.New(t), "OTEL_EXPORTER_OTLP_ENDPOINT="+hs.URL, "OTEL_BSP_SCHEDULE_DELAY=600000",
		"OTEL_RESOURCE_ATTRIBUTES=deployment.environment.name=wire-test", "OTEL_SERVICE_NAME=", "OTEL_SDK_DISABLED=", "OTEL_TRACES_EXPORTER=")
	tid := uuid.NewString()
	body := `{"message":{"content":"what is 12*7 and what time is it?"},"run_config":{"model":"builtin:demo"}}`
	resp, err := http.Post("http://"+s.addr+"/api/v1/threads/"+tid+"/runs/stream", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var first struct {
		RunID string `json:"run_id"`
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(line), &first) != nil || strings.Count(string(b), `"tool_result"`) != 2 {
		t.Fatalf("demo run: got %d %.300s, want a stream with two tool results", resp.StatusCode, b)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("server did not exit after SIGTERM")
	}

	recv.mu.Lock()
	defer recv.mu.Unlock()
	if len(recv.res) == 0 || recv.res[0]["service.name"] != "threadline" || recv.res[0]["deployment.environment.name"] != "wire-test" {
		t.Fatalf("resources: got %v, want service.name threadline and the environment's attribute", recv.res)
	}
	byName := map[string][]*tracepb.Span{}
	for _, sp := range recv.spans {
		byName[sp.Name] = append(byName[sp.Name], sp)
	}
	run, chats, calc, clock := byName["invoke_agent threadline"], byName["chat demo"], byName["execute_tool calculator"], byName["execute_tool clock"]
	if len(run) != 1 || len(chats) != 2 || len(calc) != 1 || len(clock) != 1 || len(recv.spans) != 5 {
		t.Fatalf("spans: got %v, want invoke_agent, two chat demo, execute_tool calculator and clock", keys(byName))
	}
	ra := attrs(run[0].Attributes)
	for k, want := range map[string]string{"gen_ai.operation.name": "invoke_agent", "threadline.thread_id": tid, "threadline.run_id": first.RunID,
		"gen_ai.conversation.id": tid, "gen_ai.request.model": "demo", "threadline.run.status": "succeeded"} {
		if ra[k] != want {
			t.Errorf("invoke_agent %s: got %q, want %q", k, ra[k], want)
		}
	}
	step := chats[0]
	if chats[1].StartTimeUnixNano < step.StartTimeUnixNano {
		step = chats[1]
	}
	if ca := attrs(step.Attributes); ca["gen_ai.operation.name"] != "chat" || ca["gen_ai.response.finish_reasons"] != `["tool_call"]` || ca["gen_ai.usage.output_tokens"] == "" {
		t.Errorf("first chat span: got %v, want operation chat, finish reason tool_call and output tokens", ca)
	}
	for _, c := range chats {
		if hex.EncodeToString(c.ParentSpanId) != hex.EncodeToString(run[0].SpanId) || hex.EncodeToString(c.TraceId) != hex.EncodeToString(run[0].TraceId) {
			t.Errorf("chat span's parent: got %x, want the invoke_agent span %x", c.ParentSpanId, run[0].SpanId)
		}
	}
	for _, tc := range []struct {
		span *tracepb.Span
		name string
	}{{calc[0], "calculator"}, {clock[0], "clock"}} {
		a := attrs(tc.span.Attributes)
		if a["gen_ai.operation.name"] != "execute_tool" || a["gen_ai.tool.name"] != tc.name || a["gen_ai.tool.call.id"] == "" {
			t.Errorf("execute_tool %s attributes: got %v", tc.name, a)
		}
		if hex.EncodeToString(tc.span.ParentSpanId) != hex.EncodeToString(step.SpanId) {
			t.Errorf("execute_tool %s parent: got %x, want the first step's chat span %x", tc.name, tc.span.ParentSpanId, step.SpanId)
		}
	}
}

func keys(m map[string][]*tracepb.Span) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = len(v)
	}
	return out
}

// TestTracesOn: traces are on with either OTLP endpoint variable, unless
// the SDK is disabled or the traces exporter is none.
func TestTracesOn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "TRUE"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "false"}, true},
	} {
		if got := tracesOn(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("tracesOn(%v): got %v, want %v", tc.env, got, tc.want)
		}
	}
}
