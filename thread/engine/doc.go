// Package engine holds the run engine's background services, each a
// component with an owned goroutine (Start, Stop): the Lifecycle that owns
// such a goroutine, the GroupCommit that writes every run's event log in
// one transaction per commit and publishes it once durable, the Batcher
// that writes requests arriving together in one store write, the
// RawWriter that queues runs' raw records and writes them off the model
// loop, the Relay that brings the runs of other processes to this
// process's followers with one reader per run, and Watch, the loop that
// hands other processes' changes to the service. It knows nothing of threads
// or runs: package thread wires these services to its Store, and of this
// module this package imports only thread/errcode and stream.
package engine
