package api

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/threadline/threadline/thread"
)

// RawStore reads runs' raw records for GET …/runs/{run_id}/raw;
// *store.Store is one.
type RawStore interface {
	// RunRawList returns up to limit of the run's raw records after record
	// after, in order; not_found for an unknown run, a run of another
	// thread, or another caller's.
	RunRawList(ctx context.Context, caller string, threadID, runID uuid.UUID, after int64, limit int) ([]thread.RawRecord, error)
}

// rawPage is how many records one read of the store returns.
const rawPage = 500

// rawLine is one line of GET …/raw.
type rawLine struct {
	N        int64           `json:"n"`
	Sequence int64           `json:"sequence"`
	Source   string          `json:"source"`
	Kind     string          `json:"kind"`
	At       time.Time       `json:"at"`
	Data     json.RawMessage `json:"data"`
}

// getRunRaw answers the run's raw records as NDJSON, one a line, read from
// the store page by page. Errors before the first page are JSON errors;
// one after it ends the body early (and is logged).
func (s *Server) getRunRaw(c echo.Context) error {
	threadID, runID, err := pathRun(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	recs, err := s.cfg.Raw.RunRawList(ctx, caller(c), threadID, runID, 0, rawPage)
	if err != nil {
		return err
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	enc := json.NewEncoder(bw)
	for {
		for _, r := range recs {
			if err := enc.Encode(rawLine{N: r.N, Sequence: r.Sequence, Source: r.Source, Kind: r.Kind, At: r.At, Data: r.Data}); err != nil {
				return nil // the client left
			}
		}
		if len(recs) < rawPage {
			break
		}
		if recs, err = s.cfg.Raw.RunRawList(ctx, caller(c), threadID, runID, recs[len(recs)-1].N, rawPage); err != nil {
			if ctx.Err() == nil {
				s.log.Error("raw records", "run_id", runID, "request_id", w.Header().Get(echo.HeaderXRequestID), "err", err)
			}
			break
		}
	}
	_ = bw.Flush()
	return nil
}
