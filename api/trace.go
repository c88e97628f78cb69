package api

import (
	"context"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/thread"
)

// TraceStore reads what a run's trace is built from, for GET
// …/runs/{run_id}/trace; *store.Store is one.
type TraceStore interface {
	// RunTraceSource returns the run, its log and its marks; not_found
	// for an unknown run, a run of another thread, or another caller's.
	RunTraceSource(ctx context.Context, caller string, threadID, runID uuid.UUID) (thread.TraceSource, error)
}

// getRunTrace answers the run's trace (thread.BuildTrace).
func (s *Server) getRunTrace(c echo.Context) error {
	threadID, runID, err := pathRun(c)
	if err != nil {
		return err
	}
	src, err := s.cfg.Trace.RunTraceSource(c.Request().Context(), caller(c), threadID, runID)
	if err != nil {
		return err
	}
	tr := thread.BuildTrace(src)
	return c.JSON(http.StatusOK, wire.NewTrace(&tr))
}
