package store

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/threadline/threadline/checkpoint/errcode"
)

// errUnavailable is the database outage as callers see it: a 503 with
// Retry-After at the HTTP edge. The pool reconnects by itself once the
// database answers again.
var errUnavailable = &errcode.Error{Code: errcode.Unavailable, Message: "the database is unavailable; retry shortly"}

// isOutage reports whether err says the database cannot be reached or is
// going away (refused or reset connections, admin or crash shutdown, a
// server that cannot accept connections yet), rather than anything about
// the request. A caller's own cancellation is not an outage.
func isOutage(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// 08: connection exception; 57P01-57P03: admin shutdown, crash
		// shutdown, cannot connect now; 53300: too many connections.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || pe.Code == "53300"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	case errors.Is(err, context.DeadlineExceeded):
		return false
	}
	// pgconn's "conn closed" and other errors raised before anything was
	// sent: the connection was lost, the request never reached the server.
	return pgconn.SafeToRetry(err)
}
