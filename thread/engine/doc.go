// Package engine runs runs: Service starts a run on a thread (a fork, an
// edit, a continuation), drives its model and, for agent runs, its tools
// step by step, writes every event to the run's durable log before it is
// published, ends every run with a final snapshot whatever fails, follows
// runs for clients (rejoin, replay, another process's runs), cancels and
// deletes across processes, renews its runs' claims and recovers the runs
// of processes that died. It works on package thread's types through
// thread.Store, thread.Hub and thread.Models.
//
// Its background machinery lives in internal packages, each a component
// with one goroutine it owns (Start, Stop) and tests of its own under
// -race: lifecycle (the owner of such a goroutine), commit (the group
// commit of every run's log), batch (starts and ends arriving together,
// written in one store write), relay (one reader per run of another
// process, whatever the number of its followers here) and watch (the loop
// that hands other processes' changes to the service). The RawWriter
// (raw.go) keeps runs' raw provider and tool records off the model loop.
//
// The Service is a façade over jobs that own their data, each an
// internal package whose struct receives its dependencies as fields (no
// pointer back to the Service) and is tested alone on the fake store:
// starter (a run's start: the fork, a continuation, a retried message id,
// the limits, the model request), runner (running a run: the turn and
// the agent loop, the log writer side of the group commit, the end and
// its retries, lease renewal and recovery; its Registry holds the runs
// this process owns) and follow (following a run: live, replay, relay),
// over the tree cache (trees) and runlog (a log record's event).
//
// New starts nothing: Start starts every loop (the writers, the lease
// loop, the relay, the watch of other processes' changes), Stop stops
// the lease loop and the watch, and Shutdown drains the runs and stops
// everything, waiting for it.
package engine
