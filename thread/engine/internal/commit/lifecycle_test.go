package commit

import (
	"testing"
)

// TestGroupCommitStartStop: Stop returns once the commit goroutine has
// (Stopped closes), and Start runs it again.
func TestGroupCommitStartStop(t *testing.T) {
	t.Parallel()
	c := NewGroupCommit[int, string](nil, nil, nil, nil)
	for range 2 {
		c.Start()
		<-c.life.Started()
		if !c.life.Running() {
			t.Fatal("running after Start: got false, want true")
		}
		c.Stop()
		<-c.life.Stopped()
		if c.life.Running() {
			t.Fatal("running after Stop: got true, want false")
		}
	}
}
