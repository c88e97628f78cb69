package api

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// AttachmentStore keeps uploads durably.
type AttachmentStore interface {
	// AttachmentCreate stores a.
	AttachmentCreate(ctx context.Context, a *thread.File) error
	// AttachmentGet returns not_found for an unknown or foreign attachment.
	AttachmentGet(ctx context.Context, caller string, id uuid.UUID) (*thread.File, error)
}

// inlineTypes are the attachment types served inline: raster images.
var inlineTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

func (s *Server) uploadAttachment(c echo.Context) error {
	r := c.Request()
	mt, _, _ := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType))
	if mt != "multipart/form-data" {
		return errcode.New(errcode.UnsupportedMediaType, "upload a file as multipart/form-data in the field \"file\"")
	}
	// Room for the multipart framing around the file.
	limit := s.cfg.MaxAttachment + 64<<10
	if r.ContentLength > limit {
		// Refused before a byte of it is read (GET /limits lets a client
		// know this before it sends).
		return errcode.New(errcode.TooLarge, "attachment is over the %d byte limit", s.cfg.MaxAttachment)
	}
	r.Body = http.MaxBytesReader(c.Response(), r.Body, limit)
	mr, err := r.MultipartReader()
	if err != nil {
		return errcode.New(errcode.Invalid, "malformed multipart body: %v", err)
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return errcode.New(errcode.Invalid, "no file: send it in the multipart field \"file\"")
		}
		if err != nil {
			return tooLargeOr(err, s.cfg.MaxAttachment, "malformed multipart body")
		}
		if part.FormName() != "file" || part.FileName() == "" {
			continue
		}
		// The raw header too: mime.ParseMediaType turns invalid UTF-8 in a
		// quoted name into U+FFFD, which would store another name than sent.
		if err := checkFileName(part.Header.Get("Content-Disposition")); err != nil {
			return err
		}
		if err := checkFileName(part.FileName()); err != nil {
			return err
		}
		ct, _, _ := mime.ParseMediaType(part.Header.Get(echo.HeaderContentType))
		if ct == "" || ct == "application/octet-stream" {
			ct = mime.TypeByExtension(filepath.Ext(part.FileName()))
			ct, _, _ = mime.ParseMediaType(ct)
		}
		if !slices.Contains(s.cfg.AttachmentTypes, ct) {
			return errcode.New(errcode.UnsupportedMediaType, "content type %q is not accepted; accepted: %s", ct, strings.Join(s.cfg.AttachmentTypes, ", "))
		}
		data, err := io.ReadAll(io.LimitReader(part, s.cfg.MaxAttachment+1))
		if err != nil {
			return tooLargeOr(err, s.cfg.MaxAttachment, "reading the upload failed")
		}
		if int64(len(data)) > s.cfg.MaxAttachment {
			return errcode.New(errcode.TooLarge, "attachment is over the %d byte limit", s.cfg.MaxAttachment)
		}
		a := &thread.File{ID: uuid.New(), Caller: caller(c), Name: filepath.Base(part.FileName()), ContentType: ct, Size: int64(len(data)), Data: data}
		if err := s.cfg.Attachments.AttachmentCreate(r.Context(), a); err != nil {
			return err
		}
		return c.JSON(http.StatusCreated, map[string]any{"id": a.ID, "name": a.Name, "contentType": a.ContentType,
			"size": a.Size, "url": thread.AttachmentURL(a.ID)})
	}
}

func tooLargeOr(err error, limit int64, msg string) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errcode.New(errcode.TooLarge, "attachment is over the %d byte limit", limit)
	}
	return errcode.New(errcode.Invalid, "%s: %v", msg, err)
}

func (s *Server) getAttachment(c echo.Context) error {
	id, err := pathUUID(c, "id")
	if err != nil {
		return err
	}
	a, err := s.cfg.Attachments.AttachmentGet(c.Request().Context(), caller(c), id)
	if err != nil {
		return err
	}
	return serveFile(c, a, "private, max-age=31536000, immutable")
}

// serveFile answers with an attachment's bytes and the given Cache-Control.
func serveFile(c echo.Context, a *thread.File, cache string) error {
	h := c.Response().Header()
	h.Set("Content-Length", strconv.FormatInt(a.Size, 10))
	// Only images a browser renders without running anything are shown
	// inline (an <img> of the chat, never SVG); everything else downloads.
	// The sandbox CSP (secureHeaders) keeps a served file from running
	// script in the API's origin either way.
	disp := "attachment"
	if inlineTypes[a.ContentType] {
		disp = "inline"
	}
	name := map[string]string{"filename": a.Name}
	cd := mime.FormatMediaType(disp, name)
	if cd == "" {
		cd = disp // a name FormatMediaType cannot encode is left out
	}
	h.Set("Content-Disposition", cd)
	h.Set("Cache-Control", cache)
	return c.Blob(http.StatusOK, a.ContentType, a.Data)
}
