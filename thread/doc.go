// Package thread owns threads, runs and the run loop: it resolves a run
// request against the checkpoint tree, streams the model's tokens into the
// run's durable event log, publishes each event only after it is durable, and
// recovers runs whose process died. It talks to Postgres and to the event hub
// only through the Store and Hub interfaces it defines. The engine's
// background services (the group commit, the batchers, the raw writer, the
// relay, the wake-up loop) are package thread/engine, which this package
// wires to its Store.
package thread
