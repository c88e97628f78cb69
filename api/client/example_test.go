package client_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/threadline/threadline/api/client"
)

// A run of the demo model that calls the calculator: the iterator yields
// every event once, in order, and rejoins by itself if the connection
// drops.
func ExampleClient_RunStream() {
	c := client.New(exampleURL) // e.g. "http://127.0.0.1:8080", client.WithKey(key)
	req := client.RunRequest{
		Message:   &client.NewMessage{Content: "what is 12*7?"},
		RunConfig: &client.RunConfig{Model: "builtin:demo"},
	}
	args := map[string]string{}
	for ev, err := range c.RunStream(context.Background(), uuid.NewString(), req) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		switch ev.Type {
		case client.EventToolCall:
			args[ev.ToolCallID] += *ev.ArgsText
		case client.EventToolResult:
			fmt.Printf("tool %s -> %s\n", args[ev.ToolCallID], ev.Result)
		case client.EventSnapshot:
			if ev.Final() {
				fmt.Println(ev.RunStatus)
				fmt.Println(ev.LastMessage().Text())
			}
		}
	}
	// Output:
	// tool {"expression":"12*7"} -> 84
	// succeeded
	// I'll work out `12*7` with the calculator.
	//
	// **12*7 = 84**
	//
	// That is what the tools said; I only pass their answers on.
}

// Errors carry the contract's status and code; errors.Is tests the code.
func ExampleError() {
	c := client.New(exampleURL)
	_, err := c.ThreadGet(context.Background(), uuid.NewString())
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Code, errors.Is(err, client.ErrNotFound))
	}
	// Output: 404 not_found true
}

// A client tool: the run waits (requires_action) until the caller
// continues the turn with the tool's result.
func ExampleClient_RunContinue() {
	ctx := context.Background()
	c := client.New(exampleURL)
	tid := uuid.NewString()
	ask := client.ToolSpec{Name: "ask_user", Description: "ask the person a question",
		Parameters: []byte(`{"type":"object"}`), Client: true}
	req := client.RunRequest{
		Message:   &client.NewMessage{Content: "ask me what to do"},
		RunConfig: &client.RunConfig{Model: "builtin:demo", Tools: []client.ToolSpec{ask}},
	}
	var waiting *client.Message
	for ev, err := range c.RunStream(ctx, tid, req) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		if ev.Final() {
			fmt.Println(ev.RunStatus)
			waiting = ev.LastMessage()
		}
	}
	call := waiting.WaitingCalls()[0]
	fmt.Printf("%s %s\n", call.ToolName, call.Args)
	run, err := c.RunContinue(ctx, tid, waiting.ID, []client.ToolResult{{ToolCallID: call.ToolCallID, Result: "Do the sums"}}, nil)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	for ev, err := range run.Events() {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		if ev.Final() {
			fmt.Println(ev.RunStatus)
			fmt.Println(ev.LastMessage().Text())
		}
	}
	// Output:
	// requires_action
	// ask_user {"choices":["Make a plan","Do the sums"],"question":"Which should I do first?"}
	// succeeded
	// Before I go on with “ask me what to do”, I need to know one thing.
	//
	// You answered: **Do the sums**. Thank you, that is what I needed.
	//
	// That is what the tools said; I only pass their answers on.
}
