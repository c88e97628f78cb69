package main

import (
	"context"
	"errors"
	"io"
)

// benchCmd runs the benchmarks. Not implemented yet: issue 7 adds
// `bench peer` and `bench load`.
func benchCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return errors.New("bench: not implemented yet")
}
