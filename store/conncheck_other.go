//go:build !linux

package store

import "net"

// pendingConn has no non-blocking peek here: it reports nothing waiting,
// and a connection that died while idle is found only by pgx's own ping
// of connections idle for longer than a second.
func pendingConn(net.Conn) bool { return false }
