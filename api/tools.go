package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/threadline/threadline/model/tool"
)

// ToolLister lists the server's tools for GET /api/v1/tools: the
// built-in tools and those of the configured MCP servers.
type ToolLister interface {
	// Specs returns every tool's spec, sorted by name.
	Specs() []tool.Spec
}

var _ ToolLister = (*tool.Registry)(nil)

// toolsBody is the answer of GET /api/v1/tools.
type toolsBody struct {
	Tools []tool.Spec `json:"tools"`
}

// listTools answers {"tools": [...]}, an empty list when the server has
// no tool registry.
func (s *Server) listTools(c echo.Context) error {
	specs := []tool.Spec{}
	if s.cfg.Tools != nil {
		if got := s.cfg.Tools.Specs(); got != nil {
			specs = got
		}
	}
	return c.JSON(http.StatusOK, toolsBody{Tools: specs})
}
