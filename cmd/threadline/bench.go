package main

import (
	"context"
	"errors"
	"fmt"
	"io"
)

const benchUsage = `usage: threadline bench peer|load|floor [flags]

  peer   the workload of the peer comparison (PEER_WORKLOAD.md): turns, forks,
         edits, snapshots, history, bytes per turn and tokens/s, in-process
         and over HTTP; prints one JSON object as the last line of stdout
  load   K concurrent streams over real HTTP against a service, with clients
         that disconnect and rejoin; prints one JSON object per K
  floor  the floor under load (what bench load --floor starts): the same
         stream endpoints kept in memory, no database, no durability; not a
         service to deploy

Run either with --help to list its settings.
`

// benchCmd dispatches `threadline bench`.
func benchCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, benchUsage)
		return errors.New("bench needs peer or load")
	}
	switch args[0] {
	case "peer":
		return benchPeer(ctx, args[1:], getenv, stdout, stderr)
	case "load":
		return benchLoad(ctx, args[1:], getenv, stdout, stderr)
	case "floor":
		return benchFloor(ctx, args[1:], getenv, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, benchUsage)
		return nil
	}
	fmt.Fprint(stderr, benchUsage)
	return fmt.Errorf("unknown bench %q", args[0])
}
