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
// The Service's own loops (lease renewal, recovery and the log's purge;
// the watch of other processes' changes) are owned the same way: Start
// starts them, Stop and Shutdown stop them and wait.
//
// The Service's own state is two small structures with a lock each: the
// tree cache (cache.go) and the registry of the runs this process owns
// (registry.go).
package engine
