package store

import (
	"context"
	"net"

	"github.com/jackc/pgx/v5"
)

// prepareConn is the pools' check of a connection they are about to hand
// out (pgxpool's PrepareConn). A connection whose server session ended
// while it sat idle (Postgres restarted or stopped, the session
// terminated) has the server's FATAL and the end of the stream waiting on
// its socket, where a live idle connection has nothing. The check peeks at
// the socket without blocking, and only when something waits pings the
// connection: unless the ping succeeds, the pool destroys it and takes
// another or opens one, so that no statement is sent on a dead
// connection. (pgx itself pings only connections idle for longer than a
// second; a quick restart leaves younger ones, which would fail their
// first statement with 57P01 and the caller with unavailable.) It never
// fails the acquire.
func prepareConn(ctx context.Context, conn *pgx.Conn) (bool, error) {
	if !pending(conn.PgConn().Conn()) {
		return true, nil
	}
	return conn.Ping(ctx) == nil, nil
}

// pending reports whether the socket under c has something to read (bytes
// or its end), or cannot be checked; false when nothing waits or the
// platform has no check (pendingConn).
func pending(c net.Conn) bool {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = tc.NetConn() // TLS: the socket under it
	}
	return pendingConn(c)
}
