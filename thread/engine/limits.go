package engine

// Limits bound what one caller, thread or model call may hold. Zero values
// take the defaults in parentheses; a negative value turns a limit off.
type Limits struct {
	// RunsPerCaller is how many runs one caller may have in progress at
	// once in this process (64); more are refused with rate_limited. With
	// on_disconnect "continue" a run outlives its stream, so the HTTP
	// layer's cap on streams does not bound runs.
	RunsPerCaller int
	// RunsPerProcess is how many runs this process may have in progress
	// at once, of all callers (4,096); more are refused with unavailable
	// (another replica, or this one later, may take them).
	RunsPerProcess int
	// MessagesPerThread is how many messages a thread may hold (10,000);
	// a run that would go over is refused with too_large.
	MessagesPerThread int
	// LogPageBytes is how much of a run's log one follower reads from the
	// store at once (1 MiB, in RecordSize): a rejoin of a finished or
	// another process's run pages through the log, so a stalled reader
	// holds about one page, not the whole log.
	LogPageBytes int
	// InlineBytes is how many attachment bytes one model call may carry
	// inlined (20 MiB), newest messages first; attachments over it are
	// named to the model, not read.
	InlineBytes int64
}

func (l *Limits) defaults() {
	if l.RunsPerCaller == 0 {
		l.RunsPerCaller = 64
	}
	if l.RunsPerProcess == 0 {
		l.RunsPerProcess = 4096
	}
	if l.LogPageBytes <= 0 {
		l.LogPageBytes = 1 << 20
	}
	if l.MessagesPerThread == 0 {
		l.MessagesPerThread = 10000
	}
	if l.InlineBytes == 0 {
		l.InlineBytes = 20 << 20
	}
}
