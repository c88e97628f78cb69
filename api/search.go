package api

import (
	"context"
	"encoding/base64"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// SearchStore finds the caller's messages for GET /api/v1/search;
// *store.Store is one.
type SearchStore interface {
	// MessageSearch returns up to q.Limit of the caller's messages that
	// match q, best first, after q.After; invalid_request when q.Text has
	// no words to search for.
	MessageSearch(ctx context.Context, caller string, q thread.SearchQuery) ([]thread.SearchHit, error)
}

// Search limits: the longest q and title, the default and largest page.
const (
	maxSearchRunes = 256
	searchPage     = 20
	maxSearchPage  = 50
)

// searchResult is one hit as GET /search answers it.
type searchResult struct {
	ThreadID    uuid.UUID `json:"thread_id"`
	ThreadTitle *string   `json:"thread_title"`
	MessageID   uuid.UUID `json:"message_id"`
	Role        string    `json:"role"`
	CreatedAt   string    `json:"created_at"`
	Snippet     string    `json:"snippet"`
	Highlights  [][2]int  `json:"highlights"`
	Score       float32   `json:"score"`
}

// search answers GET /api/v1/search: the caller's messages that match q,
// on every branch, best first, a page at a time.
func (s *Server) search(c echo.Context) error {
	q, err := searchQuery(c)
	if err != nil {
		return err
	}
	limit := q.Limit
	q.Limit++
	hits, err := s.cfg.Search.MessageSearch(c.Request().Context(), caller(c), q)
	if err != nil {
		return err
	}
	var next *string
	if len(hits) > limit {
		hits = hits[:limit]
		last := hits[len(hits)-1]
		nc := encodeSearchCursor(thread.SearchCursor{Score: last.Score, CreatedAt: last.CreatedAt, MessageID: last.MessageID})
		next = &nc
	}
	out := make([]searchResult, len(hits))
	for i, h := range hits {
		hl := h.Highlights
		if hl == nil {
			hl = [][2]int{}
		}
		out[i] = searchResult{ThreadID: h.ThreadID, ThreadTitle: h.ThreadTitle, MessageID: h.MessageID, Role: h.Role,
			CreatedAt: h.CreatedAt.UTC().Format(time.RFC3339Nano), Snippet: h.Snippet, Highlights: hl, Score: h.Score}
	}
	return c.JSON(http.StatusOK, map[string]any{"results": out, "next_cursor": next})
}

// searchQuery reads and checks the query parameters: invalid_request for
// an empty or too long q, a bad limit, date, role or cursor.
func searchQuery(c echo.Context) (thread.SearchQuery, error) {
	var q thread.SearchQuery
	q.Text = strings.TrimSpace(c.QueryParam("q"))
	if q.Text == "" {
		return q, errcode.New(errcode.Invalid, "q is required: the words to search for")
	}
	if !utf8.ValidString(q.Text) || strings.ContainsRune(q.Text, 0) || utf8.RuneCountInString(q.Text) > maxSearchRunes {
		return q, errcode.New(errcode.Invalid, "q must be valid UTF-8 text of at most %d characters", maxSearchRunes)
	}
	q.Title = c.QueryParam("title")
	if !utf8.ValidString(q.Title) || strings.ContainsRune(q.Title, 0) || utf8.RuneCountInString(q.Title) > maxSearchRunes {
		return q, errcode.New(errcode.Invalid, "title must be valid UTF-8 text of at most %d characters", maxSearchRunes)
	}
	q.Limit = searchPage
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxSearchPage {
			return q, errcode.New(errcode.Invalid, "limit must be a whole number between 1 and %d, got %q", maxSearchPage, v)
		}
		q.Limit = n
	}
	var err error
	if q.From, err = searchTime(c, "from"); err != nil {
		return q, err
	}
	if q.To, err = searchTime(c, "to"); err != nil {
		return q, err
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return q, errcode.New(errcode.Invalid, "from must be before to")
	}
	switch q.Role = c.QueryParam("role"); q.Role {
	case "", "user", "assistant":
	default:
		return q, errcode.New(errcode.Invalid, "role must be user or assistant, got %q", q.Role)
	}
	if v := c.QueryParam("cursor"); v != "" {
		after, err := decodeSearchCursor(v)
		if err != nil {
			return q, err
		}
		q.After = &after
	}
	return q, nil
}

// searchTime reads an RFC 3339 time parameter; zero when absent.
func searchTime(c echo.Context, name string) (time.Time, error) {
	v := c.QueryParam(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, errcode.New(errcode.Invalid, "%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", name, v)
	}
	return t.UTC(), nil
}

// A search cursor is the last hit's key: its score's bits, its time and
// its message id, base64url-encoded; opaque to clients.
func encodeSearchCursor(c thread.SearchCursor) string {
	s := strconv.FormatUint(uint64(math.Float32bits(c.Score)), 16) + "|" + c.CreatedAt.UTC().Format(time.RFC3339Nano) + "|" + c.MessageID.String()
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

func decodeSearchCursor(v string) (thread.SearchCursor, error) {
	bad := errcode.New(errcode.Invalid, "cursor is not a cursor this search returned")
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return thread.SearchCursor{}, bad
	}
	parts := strings.Split(string(b), "|")
	if len(parts) != 3 {
		return thread.SearchCursor{}, bad
	}
	bits, err := strconv.ParseUint(parts[0], 16, 32)
	score := math.Float32frombits(uint32(bits))
	if err != nil || math.IsNaN(float64(score)) || math.IsInf(float64(score), 0) {
		return thread.SearchCursor{}, bad
	}
	at, err := time.Parse(time.RFC3339Nano, parts[1])
	if err != nil {
		return thread.SearchCursor{}, bad
	}
	id, err := uuid.Parse(parts[2])
	if err != nil || len(parts[2]) != 36 {
		return thread.SearchCursor{}, bad
	}
	return thread.SearchCursor{Score: score, CreatedAt: at.UTC(), MessageID: id}, nil
}
