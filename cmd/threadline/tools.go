package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/threadline/threadline/model/mcp"
	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
)

// openTools builds the server's tool registry: the built-in tools and,
// when cfg names an MCP config file, the tools of its servers, connected
// at once and all within cfg.MCPConnectTimeout. A config file that cannot
// be read or is invalid stops the start (the error says what is wrong); a
// server that cannot be reached or listed in time is logged as an error
// and left out, and the service starts without its tools (until it is
// restarted). The returned servers, nil without a config file, are closed
// by the caller on shutdown.
func openTools(ctx context.Context, cfg Config, log *slog.Logger) (*tool.Registry, *mcp.Servers, error) {
	reg := tool.NewRegistry(0)
	builtins, err := withApproval(tool.Builtins(nil), cfg.ToolApproval)
	if err != nil {
		return nil, nil, err
	}
	if err := reg.Add(builtins...); err != nil {
		return nil, nil, err
	}
	if cfg.MCPConfig == "" {
		return reg, nil, nil
	}
	mc, err := mcp.LoadConfig(cfg.MCPConfig)
	if err != nil {
		return nil, nil, fmt.Errorf("THREADLINE_MCP_CONFIG: %w", err)
	}
	timeout := cfg.MCPConnectTimeout
	if timeout <= 0 {
		timeout = mcp.ConnectTimeout
	}
	octx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	servers, err := mcp.Open(octx, mc, mcp.Options{Getenv: cfg.Getenv, Logger: log})
	failed := unjoin(err)
	for _, e := range failed {
		log.Error("MCP server not connected; its tools are left out until the service restarts", "error", e.Error())
	}
	if err := reg.Add(servers.Tools()...); err != nil {
		_ = servers.Close()
		return nil, nil, fmt.Errorf("MCP tools: %w", err)
	}
	log.Info("MCP servers connected", "configured", len(mc.Servers), "failed", len(failed),
		"tools", len(servers.Tools()), "took", time.Since(start).Round(time.Millisecond).String())
	return reg, servers, nil
}

// withApproval marks the built-in tools named in names as needing approval.
// Errors: a name that is no built-in tool (THREADLINE_TOOL_APPROVAL).
func withApproval(tools []tool.Tool, names []string) ([]tool.Tool, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := make([]tool.Tool, len(tools))
	for i, t := range tools {
		out[i] = t
		if want[t.Spec().Name] {
			out[i] = tool.NeedApproval(t)
			delete(want, t.Spec().Name)
		}
	}
	for n := range want {
		return nil, fmt.Errorf("THREADLINE_TOOL_APPROVAL: %q is not a built-in tool", n)
	}
	return out, nil
}

// unjoin lists the errors of an errors.Join (none for nil).
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	var j interface{ Unwrap() []error }
	if errors.As(err, &j) {
		return j.Unwrap()
	}
	return []error{err}
}

// listedTools is what GET /tools lists: the registry's tools and the
// engine's delegate tool, sorted by name.
type listedTools struct{ reg *tool.Registry }

// Specs implements api.ToolLister.
func (l listedTools) Specs() []thread.ToolSpec {
	if l.reg == nil {
		return nil
	}
	out := append(l.reg.Specs(), engine.DelegateSpec)
	slices.SortFunc(out, func(a, b thread.ToolSpec) int { return strings.Compare(a.Name, b.Name) })
	return out
}
