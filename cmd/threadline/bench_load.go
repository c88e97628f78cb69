package main

import (
	"context"
	"errors"
	"io"
)

// benchLoad runs the concurrent-streams load test. Not implemented yet (issue 7).
func benchLoad(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return errors.New("bench load: not implemented yet")
}
