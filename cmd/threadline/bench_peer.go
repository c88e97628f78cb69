package main

import (
	"context"
	"errors"
	"io"
)

// benchPeer runs the peer workload. Not implemented yet (issue 7).
func benchPeer(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return errors.New("bench peer: not implemented yet")
}
