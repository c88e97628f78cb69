package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/threadline/threadline/api"
	"github.com/threadline/threadline/store"
)

// openAPIMethods are the operation keys of an OpenAPI path item.
var openAPIMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

type openAPIParam struct {
	Name string `json:"name"`
	In   string `json:"in"`
}

type openAPIOp struct {
	Parameters []openAPIParam `json:"parameters"`
}

type openAPIServer struct {
	URL string `json:"url"`
}

type openAPIDoc struct {
	OpenAPI string                                `json:"openapi"`
	Servers []openAPIServer                       `json:"servers"`
	Paths   map[string]map[string]json.RawMessage `json:"paths"`
}

// routeServer builds the API with every optional route on and no database:
// listing routes and serving the OpenAPI document touch neither the thread
// service nor the attachment store.
func routeServer() *api.Server {
	return api.New(nil, api.Config{Attachments: (*store.Store)(nil), Raw: (*store.Store)(nil), Trace: (*store.Store)(nil), Transfer: (*store.Store)(nil), Shares: (*store.Store)(nil), Search: (*store.Store)(nil)})
}

// servedOpenAPI fetches the document the way a client does.
func servedOpenAPI(t *testing.T, srv http.Handler) openAPIDoc {
	t.Helper()
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/openapi.json", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /api/v1/openapi.json: got %d, want 200: %s", rec.Code, rec.Body)
	}
	var doc openAPIDoc
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("openapi.json does not parse: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Fatalf("openapi version: got %q, want 3.1.x", doc.OpenAPI)
	}
	return doc
}

// braceParam is an OpenAPI path parameter, "{thread_id}".
var braceParam = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)

// documentedRoutes is every "METHOD /full/path" of the document, in echo's
// form (":param"), with each path item's servers overriding the document's.
// It also reports path parameters that the template names but no parameter
// declares, and the other way round.
func documentedRoutes(t *testing.T, doc openAPIDoc) map[string]bool {
	t.Helper()
	base := ""
	if len(doc.Servers) > 0 {
		base = doc.Servers[0].URL
	}
	out := map[string]bool{}
	for path, item := range doc.Paths {
		prefix := base
		var shared openAPIOp
		if raw, ok := item["servers"]; ok {
			var servers []openAPIServer
			if err := json.Unmarshal(raw, &servers); err != nil || len(servers) == 0 {
				t.Errorf("%s: servers must be a non-empty array: %s", path, raw)
				continue
			}
			prefix = servers[0].URL
		}
		if raw, ok := item["parameters"]; ok {
			if err := json.Unmarshal(raw, &shared.Parameters); err != nil {
				t.Errorf("%s: parameters: %v", path, err)
			}
		}
		full := strings.TrimSuffix(prefix, "/") + path
		for key, raw := range item {
			if !slices.Contains(openAPIMethods, key) {
				continue
			}
			var op openAPIOp
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Errorf("%s %s: %v", key, path, err)
				continue
			}
			checkPathParams(t, key+" "+path, path, append(shared.Parameters, op.Parameters...))
			out[strings.ToUpper(key)+" "+braceParam.ReplaceAllString(full, ":$1")] = true
		}
	}
	return out
}

func checkPathParams(t *testing.T, op, path string, params []openAPIParam) {
	t.Helper()
	var declared, named []string
	for _, p := range params {
		if p.In == "path" {
			declared = append(declared, p.Name)
		}
	}
	for _, m := range braceParam.FindAllStringSubmatch(path, -1) {
		named = append(named, m[1])
	}
	slices.Sort(declared)
	slices.Sort(named)
	if !slices.Equal(declared, named) {
		t.Errorf("%s: path parameters declared %v, want %v (the template's)", op, declared, named)
	}
}

// registeredRoutes is every "METHOD /path" echo serves.
func registeredRoutes(t *testing.T, srv *api.Server) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, r := range srv.Routes() {
		if strings.Contains(r.Path, "*") {
			t.Errorf("route %s %s: a wildcard cannot be described in OpenAPI", r.Method, r.Path)
		}
		out[r.Method+" "+r.Path] = true
	}
	return out
}

// TestOpenAPIMatchesRoutes checks the served OpenAPI document against the
// routes echo registers, both ways: a route added without its operation,
// or an operation left behind by a removed route, fails it. Path
// parameters are compared in echo's form (":thread_id" for "{thread_id}").
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	srv := routeServer()
	documented := documentedRoutes(t, servedOpenAPI(t, srv))
	registered := registeredRoutes(t, srv)
	if len(registered) < 15 {
		t.Fatalf("echo lists %d routes, want at least 15 (did the listing break?)", len(registered))
	}
	for _, r := range sortedKeys(registered) {
		if !documented[r] {
			t.Errorf("route %s is registered but not in api/openapi.json", r)
		}
	}
	for _, r := range sortedKeys(documented) {
		if !registered[r] {
			t.Errorf("operation %s is in api/openapi.json but no route serves it", r)
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
