// Package mcptest is a small MCP server for tests, built with the same
// SDK the client uses: the tests of package mcp and of the service's
// wiring start it themselves, in process over streamable HTTP (Handler)
// or as a child process over stdio (a test binary that calls ServeStdio).
package mcptest

import (
	"context"
	"net/http"
	"os"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options shape the server.
type Options struct {
	// Crash adds the tool crash, which exits the process mid-call (for a
	// stdio server only).
	Crash bool
	// WaitCancelled, when set, hears (without blocking) when a call of
	// wait was cancelled by the client.
	WaitCancelled chan<- struct{}
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type addOut struct {
	Sum float64 `json:"sum"`
}

type waitIn struct {
	Seconds float64 `json:"seconds"`
}

type textIn struct {
	Text string `json:"text"`
}

// Server returns the test server: add (structured result), echo (text),
// fail (an IsError result), wait (until its time or the call's
// cancellation), files.read (a dot in its name) and, with Options.Crash,
// crash.
func Server(o Options) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "Adds a and b."}, func(_ context.Context, _ *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, addOut, error) {
		return nil, addOut{Sum: in.A + in.B}, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Says the text back."}, func(_ context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "you said: " + in.Text}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Fails."}, func(_ context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "it failed on purpose"}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "wait", Description: "Waits."}, func(ctx context.Context, _ *sdk.CallToolRequest, in waitIn) (*sdk.CallToolResult, any, error) {
		t := time.NewTimer(time.Duration(in.Seconds * float64(time.Second)))
		defer t.Stop()
		select {
		case <-t.C:
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "waited"}}}, nil, nil
		case <-ctx.Done():
			if o.WaitCancelled != nil {
				select {
				case o.WaitCancelled <- struct{}{}:
				default:
				}
			}
			return nil, nil, ctx.Err()
		}
	})
	sdk.AddTool(s, &sdk.Tool{Name: "files.read", Description: "A dotted name."}, func(_ context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "read"}}}, nil, nil
	})
	if o.Crash {
		sdk.AddTool(s, &sdk.Tool{Name: "crash", Description: "Exits the server process."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	}
	return s
}

// Handler serves s over streamable HTTP, for an httptest.Server.
func Handler(s *sdk.Server) http.Handler {
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
}

// ServeStdio serves s on stdin and stdout until the client goes away.
func ServeStdio(ctx context.Context, s *sdk.Server) error {
	return s.Run(ctx, &sdk.StdioTransport{})
}
