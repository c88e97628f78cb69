// Package thread is Threadline's domain: threads, runs and their rules.
// It names what a thread and a run are (Thread, Run, RunConfig, the run's
// durable log of Records and the Events a client sees), what a run request
// may ask (RunRequest.Validate), how a run's records fold into its
// assistant message's parts (Turn), what a column can hold (Storable), and
// the interfaces the rest of the service is built against: the Store that
// keeps all of it, the Hub that publishes events, the Models and Tools a
// run calls, the Wakeups other processes' writes arrive by. It imports no
// database and no HTTP; package thread/engine runs runs against it.
package thread
