package engine

import "time"

// TuneRawWriter sets w's flush interval, its bound on queued bytes and
// how many failed writes of a run it tries; call it before Start.
func TuneRawWriter(w *RawWriter, every time.Duration, max, misses int) {
	w.every, w.max, w.misses = every, max, misses
}
