// Command threadline-bench runs Threadline's benchmarks: `peer` (the peer
// workload, in-process and over HTTP) and `load` (K concurrent streams over
// loopback HTTP against a threadline service), and serves `floor`, the
// in-memory stand-in `load --floor` measures instead of the service. The
// service binary, threadline, carries none of it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/threadline/threadline/cmd/threadline-bench/internal/floor"
	"github.com/threadline/threadline/cmd/threadline-bench/internal/load"
	"github.com/threadline/threadline/cmd/threadline-bench/internal/peer"
	"github.com/threadline/threadline/cmd/threadline-bench/internal/searchbench"
	"github.com/threadline/threadline/cmd/threadline-bench/internal/transfer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Main(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0) // the usage went out already
		}
		fmt.Fprintln(os.Stderr, "threadline-bench:", err)
		os.Exit(1)
	}
}

const usage = `usage: threadline-bench peer|load|floor|import|search [flags]

  peer   the workload of the peer comparison (PEER_WORKLOAD.md): turns, forks,
         edits, snapshots, history, bytes per turn and tokens/s, in-process
         and over HTTP; prints one JSON object as the last line of stdout
  load   K concurrent streams over real HTTP against a service (by default
         the threadline binary beside this one, run as "threadline serve"),
         with clients that disconnect and rejoin; prints one JSON object per K
  floor  the floor under load (what load --floor starts): the same stream
         endpoints kept in memory, no database, no durability; not a service
         to deploy
  import the import and export of a generated ChatGPT export (--size bytes):
         messages a second and peak heap; prints one JSON object
  search GET /search's query over a corpus it builds (threads with
         branches, prose and code): latency per kind of query, index bytes
         per message, and what the index adds to a turn's writes

Run peer or load with --help to list its settings.
`

// Main runs one subcommand until ctx ends.
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("needs peer, load or floor")
	}
	switch args[0] {
	case "peer":
		return peer.Run(ctx, args[1:], getenv, stdout, stderr)
	case "load":
		return load.Run(ctx, args[1:], getenv, stdout, stderr)
	case "floor":
		return floor.Serve(ctx, args[1:], getenv, stderr)
	case "import":
		return transfer.Run(ctx, args[1:], getenv, stdout, stderr)
	case "search":
		return searchbench.Run(ctx, args[1:], getenv, stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown subcommand %q", args[0])
}
