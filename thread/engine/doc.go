// Package engine holds the run engine's background services, each a
// component with an owned goroutine (Start, Stop): the Lifecycle that owns
// such a goroutine, the Batcher that writes requests arriving together in
// one store write, and the RawWriter that queues runs' raw records and
// writes them off the model loop. It knows nothing of threads or runs:
// package thread wires these services to its Store, and this package
// imports only thread/errcode of the domain.
package engine
