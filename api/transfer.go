package api

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread/export"
)

// DefaultMaxImport is the import body limit unless Config.MaxImport says
// otherwise.
const DefaultMaxImport = 512 << 20

// transferDefaults sets the import's limits left zero.
func (cfg *Config) transferDefaults() {
	if cfg.MaxImport <= 0 {
		cfg.MaxImport = DefaultMaxImport
	}
	if cfg.MaxThreadMessages == 0 {
		cfg.MaxThreadMessages = 10000
	}
}

// transferRoutes adds the export and import routes when Transfer is set.
func (s *Server) transferRoutes(v1 *echo.Group, mw []echo.MiddlewareFunc) {
	if s.cfg.Transfer == nil {
		return
	}
	v1.GET("/threads/:thread_id/export", s.getExport, mw...)
	v1.POST("/threads/import", s.importFile, mw...)
}

// getExport answers GET …/threads/{thread_id}/export?format=json|markdown
// [&message_id=][&attachments=inline] as a download.
func (s *Server) getExport(c echo.Context) error {
	id, err := pathUUID(c, "thread_id")
	if err != nil {
		return err
	}
	format := c.QueryParam("format")
	if format == "" {
		format = "json"
	}
	if format != "json" && format != "markdown" {
		return errcode.New(errcode.Invalid, "format must be json or markdown, got %q", format)
	}
	mid, err := parseUUID("message_id", c.QueryParam("message_id"))
	if err != nil {
		return err
	}
	inline := false
	switch c.QueryParam("attachments") {
	case "", "reference":
	case "inline":
		inline = true
	default:
		return errcode.New(errcode.Invalid, "attachments must be reference or inline, got %q", c.QueryParam("attachments"))
	}
	ctx := c.Request().Context()
	x, err := s.cfg.Transfer.ThreadExport(ctx, caller(c), id)
	if err != nil {
		return err
	}
	name := exportName(x.Thread.Title, id)
	var body []byte
	var ctype string
	if format == "markdown" {
		if body, err = export.Markdown(x, mid); err != nil {
			return err
		}
		name, ctype = name+".md", "text/markdown; charset=utf-8"
	} else {
		if mid != uuid.Nil {
			tree, err := checkpoint.NewTree(x.Nodes)
			if err != nil {
				return err
			}
			if tree.Get(mid) == nil {
				return errcode.New(errcode.NotFound, "message %s is not in thread %s", mid, id)
			}
			x.Thread.HeadID = mid
		}
		var data export.AttachmentData
		if inline {
			data = s.attachmentBytes(c)
		}
		d, err := export.Build(x, data)
		if err != nil {
			return err
		}
		if body, err = d.Encode(); err != nil {
			return err
		}
		name, ctype = name+".json", echo.MIMEApplicationJSON
	}
	h := c.Response().Header()
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	return c.Blob(http.StatusOK, ctype, body)
}

// attachmentBytes reads the caller's attachments for an inline export.
func (s *Server) attachmentBytes(c echo.Context) export.AttachmentData {
	return func(sid string) ([]byte, error) {
		aid, err := uuid.Parse(sid)
		if err != nil || s.cfg.Attachments == nil {
			return nil, errcode.New(errcode.NotFound, "attachment %s not found", sid)
		}
		f, err := s.cfg.Attachments.AttachmentGet(c.Request().Context(), caller(c), aid)
		if err != nil {
			return nil, err
		}
		return f.Data, nil
	}
}

// exportName is a download's file name without extension: the title's
// letters and digits in lower case joined by dashes, and the thread id's
// first eight characters.
func exportName(title *string, id uuid.UUID) string {
	var b strings.Builder
	if title != nil {
		dash := false
		for _, r := range strings.ToLower(*title) {
			ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
			switch {
			case ok:
				if dash && b.Len() > 0 {
					b.WriteByte('-')
				}
				b.WriteRune(r)
				dash = false
			default:
				dash = true
			}
			if b.Len() >= 60 {
				break
			}
		}
	}
	if b.Len() == 0 {
		b.WriteString("thread")
	}
	return b.String() + "-" + id.String()[:8]
}

// importFile answers POST /threads/import: the file is the body (JSON or
// a ZIP), or the multipart field "file". Every thread in it is written in
// one transaction, or none.
func (s *Server) importFile(c echo.Context) error {
	r := c.Request()
	limit := s.cfg.MaxImport
	if r.ContentLength > limit+64<<10 {
		return errcode.New(errcode.TooLarge, "the file is over the %d byte import limit (THREADLINE_MAX_IMPORT)", limit)
	}
	body := io.Reader(&importBody{r: http.MaxBytesReader(c.Response(), r.Body, limit+64<<10), limit: limit})
	mt, _, _ := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType))
	switch mt {
	case echo.MIMEApplicationJSON, "application/zip", "application/x-zip-compressed", echo.MIMEOctetStream:
	case echo.MIMEMultipartForm:
		f, err := multipartFile(r, body)
		if err != nil {
			return err
		}
		body = f
	default:
		return errcode.New(errcode.UnsupportedMediaType,
			"send the file as the body (Content-Type: application/json or application/zip) or as multipart/form-data in the field \"file\" (got %q)", mt)
	}
	rd, err := export.NewReader(body, export.Options{MaxMessage: s.cfg.MaxMessage, MaxThreadMessages: max(s.cfg.MaxThreadMessages, 0), MaxAttachment: s.cfg.MaxAttachment,
		Now: time.Now().UTC().Truncate(time.Microsecond)})
	if err != nil {
		return err
	}
	defer rd.Close()
	res, err := s.cfg.Transfer.ThreadImport(r.Context(), caller(c), rd.Next)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"threads": wire.NewImported(res)})
}

// multipartFile returns the reader of the field "file" of a multipart body.
func multipartFile(r *http.Request, body io.Reader) (io.Reader, error) {
	_, params, _ := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType))
	if params["boundary"] == "" {
		return nil, errcode.New(errcode.Invalid, "malformed multipart body: no boundary")
	}
	r.Body = io.NopCloser(body)
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, errcode.New(errcode.Invalid, "malformed multipart body: %v", err)
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil, errcode.New(errcode.Invalid, "no file: send it in the multipart field \"file\"")
		}
		if err != nil {
			if _, ok := errcode.As(err); ok {
				return nil, err
			}
			return nil, errcode.New(errcode.Invalid, "malformed multipart body: %v", err)
		}
		if part.FormName() == "file" {
			return part, nil
		}
	}
}

// importBody turns the body limit's error into too_large naming the limit.
type importBody struct {
	r     io.Reader
	limit int64
}

func (b *importBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = errcode.New(errcode.TooLarge, "the file is over the %d byte import limit (THREADLINE_MAX_IMPORT)", b.limit)
	}
	return n, err
}
