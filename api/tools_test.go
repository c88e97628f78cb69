package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/threadline/threadline/api"
	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/thread"
)

type toolsAnswer struct {
	Tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Approval    *bool           `json:"approval"`
	} `json:"tools"`
}

func getTools(t *testing.T, srv http.Handler, key string) (int, toolsAnswer, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/api/v1/tools", nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	var out toolsAnswer
	if rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("GET /tools: %v in %s", err, rec.Body)
		}
	}
	return rec.Code, out, rec.Body.String()
}

// TestListTools: GET /api/v1/tools lists the registry's tools with their
// JSON Schemas and approval flags, behind authentication like every route.
func TestListTools(t *testing.T) {
	t.Parallel()
	reg := tool.NewRegistry(0)
	fixed := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	if err := reg.Add(tool.Builtins(func() time.Time { return fixed })...); err != nil {
		t.Fatal(err)
	}
	if err := reg.Add(tool.NeedApproval(renamed{tool.Calculator{}, "careful_calculator"})); err != nil {
		t.Fatal(err)
	}
	srv := api.New(nil, api.Config{APIKeys: map[string]string{"k": "alice"}, Tools: reg})

	if code, _, body := getTools(t, srv, ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /tools without a key: got %d %s, want 401", code, body)
	}
	code, got, body := getTools(t, srv, "k")
	if code != http.StatusOK {
		t.Fatalf("GET /tools: got %d %s, want 200", code, body)
	}
	var names []string
	for _, tl := range got.Tools {
		names = append(names, tl.Name)
		if tl.Approval == nil || *tl.Approval != (tl.Name == "careful_calculator") {
			t.Errorf("%s: approval %v, want %v", tl.Name, tl.Approval, tl.Name == "careful_calculator")
		}
		var schema map[string]any
		if err := json.Unmarshal(tl.Parameters, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s: parameters %s, want a JSON Schema object", tl.Name, tl.Parameters)
		}
		if spec, ok := reg.Get(tl.Name); !ok || spec.Spec().Description != tl.Description || tl.Description == "" {
			t.Errorf("%s: description %q, want the tool's own", tl.Name, tl.Description)
		}
	}
	if want := []string{"calculator", "careful_calculator", "clock", "wait"}; !slices.Equal(names, want) {
		t.Errorf("tools: got %v, want %v", names, want)
	}

	// A server without a registry lists no tools, as an empty array.
	code, _, body = getTools(t, api.New(nil, api.Config{}), "")
	if code != http.StatusOK || body != "{\"tools\":[]}\n" {
		t.Errorf("GET /tools without a registry: got %d %q, want 200 {\"tools\":[]}", code, body)
	}
}

// renamed is a tool under another name.
type renamed struct {
	tool.Tool
	name string
}

func (r renamed) Spec() thread.ToolSpec {
	s := r.Tool.Spec()
	s.Name = r.name
	return s
}
