package store

import (
	"net"
	"syscall"
)

// pendingConn peeks at c's socket without blocking (recv with MSG_PEEK and
// MSG_DONTWAIT, under RawConn.Control, which takes none of the socket's
// locks, so that a read in progress elsewhere cannot hold it up): true
// when bytes or the end of the stream wait, or on any error but "nothing
// yet".
func pendingConn(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	waiting := false
	err = raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		waiting = n > 0 || err != syscall.EAGAIN && err != syscall.EWOULDBLOCK
	})
	return waiting || err != nil
}
