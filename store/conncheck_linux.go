package store

import (
	"net"
	"syscall"
)

// pendingConn peeks at c's socket without blocking (recv with MSG_PEEK and
// MSG_DONTWAIT): true when bytes or the end of the stream wait, or on any
// error but "nothing yet".
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
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		waiting = n > 0 || err != syscall.EAGAIN && err != syscall.EWOULDBLOCK
		return true // never wait for the socket to become readable
	})
	return waiting || err != nil
}
