package api

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/thread"
)

// ToolLister lists the server's tools for GET /api/v1/tools: the
// built-in tools and those of the configured MCP servers.
type ToolLister interface {
	// Specs returns every tool's spec, sorted by name.
	Specs() []thread.ToolSpec
}

var _ ToolLister = (*tool.Registry)(nil)

// toolsBody is the answer of GET /api/v1/tools.
type toolsBody struct {
	Tools []toolJSON `json:"tools"`
}

// toolJSON is a tool as GET /api/v1/tools lists it.
type toolJSON struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Approval    bool            `json:"approval"`
}

// listTools answers {"tools": [...]}, an empty list when the server has
// no tool registry.
func (s *Server) listTools(c echo.Context) error {
	out := []toolJSON{}
	if s.cfg.Tools != nil {
		for _, sp := range s.cfg.Tools.Specs() {
			out = append(out, toolJSON{Name: sp.Name, Description: sp.Description, Parameters: sp.Parameters, Approval: sp.Approval})
		}
	}
	return c.JSON(http.StatusOK, toolsBody{Tools: out})
}
