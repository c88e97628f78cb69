package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/threadline/threadline/model/mcp"
	"github.com/threadline/threadline/model/tool"
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
	if err := reg.Add(tool.Builtins(nil)...); err != nil {
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
