package api

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
)

// streamBufs holds the streams' write buffers. A live stream flushes after
// nearly every token, so the buffer only gathers a catch-up or a burst;
// streamBufSize keeps a thousand streams' buffers small, and the pool keeps
// a new stream from allocating (and the kernel from faulting in) a fresh
// one.
var streamBufs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, streamBufSize) }}

const streamBufSize = 4 << 10

// streamOut is the response side of a run's stream, NDJSON (stream) or SSE
// (uiStream): a pooled write buffer, the stall deadline, and the headers,
// which go out with the first event, once the run is durable, so that a
// run that could not be saved still gets a JSON error.
type streamOut struct {
	w       *echo.Response
	rc      *http.ResponseController
	bw      *bufio.Writer
	dl      streamDeadline
	headers map[string]string
	started bool
}

// openStream prepares c's response for a stream of contentType with the
// extra headers; close returns its buffer.
func (s *Server) openStream(c echo.Context, contentType string, headers map[string]string) (out *streamOut, close func()) {
	w := c.Response()
	o := &streamOut{w: w, rc: http.NewResponseController(w.Writer), bw: streamBufs.Get().(*bufio.Writer), headers: headers}
	o.bw.Reset(w.Writer)
	o.headers[echo.HeaderContentType] = contentType
	s.metrics.streams.Inc()
	// The server's read and write timeouts are for ordinary requests; a
	// stream lives as long as its run. What bounds it instead is the stall
	// timeout: a write that cannot go out for that long (a reader that
	// stopped reading) ends the stream, freeing what it holds, and the
	// client rejoins from the last sequence it read.
	_ = o.rc.SetReadDeadline(time.Time{})
	o.dl = streamDeadline{rc: o.rc, stall: s.cfg.StallTimeout}
	o.dl.refresh()
	return o, func() {
		s.metrics.streams.Dec()
		o.bw.Reset(nil)
		streamBufs.Put(o.bw)
	}
}

// start sends the status and headers once.
func (o *streamOut) start() {
	if o.started {
		return
	}
	o.started = true
	h := o.w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	for k, v := range o.headers {
		h.Set(k, v)
	}
	o.w.WriteHeader(http.StatusOK)
}

// write buffers b, starting the response and moving the stall deadline.
func (o *streamOut) write(b []byte) error {
	o.start()
	o.dl.refresh()
	_, err := o.bw.Write(b)
	return err
}

// flush sends what is buffered to the client.
func (o *streamOut) flush() error {
	if err := o.bw.Flush(); err != nil {
		return err
	}
	return o.rc.Flush()
}

// end handles how a stream's FollowRun ended, err: a client that left
// cancels the run if onDisconnect is "cancel"; an error before the
// headers went out is the response (the only error returned); after
// them the client sees the stream end early and rejoins, and the error
// is logged.
func (s *Server) endStream(c echo.Context, o *streamOut, run *thread.Run, onDisconnect string, err error) error {
	ctx := c.Request().Context()
	switch {
	case ctx.Err() != nil:
		if onDisconnect == "cancel" {
			if cerr := s.svc.CancelRun(context.WithoutCancel(ctx), caller(c), run.ThreadID, run.ID); cerr != nil {
				s.log.Warn("cancel on disconnect", "run_id", run.ID, "err", cerr)
			}
		}
	case err != nil && !o.started:
		return err
	case errors.Is(err, engine.ErrShuttingDown):
		// A run of another process outlives this one: the client rejoins
		// it elsewhere.
		s.log.Info("stream ended by shutdown; the client rejoins elsewhere", "run_id", run.ID, "request_id", o.w.Header().Get(echo.HeaderXRequestID))
	case err != nil:
		s.log.Error("stream run", "run_id", run.ID, "request_id", o.w.Header().Get(echo.HeaderXRequestID), "err", err)
	}
	return nil
}
