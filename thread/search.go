package thread

import (
	"time"

	"github.com/google/uuid"
)

// SearchQuery is one search over a caller's messages (GET /api/v1/search).
type SearchQuery struct {
	// Text is what was typed: words (stemmed, in any order), "quoted
	// phrases", -excluded words, `or`, and prefixes (conf*). One word of
	// three characters or more that looks like code (camelCase, a digit,
	// _ . : / - # @ $) is also matched as a case-insensitive substring, so
	// names are found by a part (ConfigFile finds parseConfigFile).
	Text string
	// Title, when not empty, keeps threads whose title holds it
	// (case-insensitive).
	Title string
	// From and To, when not zero, keep messages created at or after From
	// and before To.
	From, To time.Time
	// Role, when not empty, keeps messages of that role.
	Role string
	// Limit is the most hits a page holds.
	Limit int
	// After is the last hit of the previous page (nil: the first page).
	After *SearchCursor
}

// SearchCursor is the key of a hit in the order results come in: score
// descending, then newest first, then message id.
type SearchCursor struct {
	Score     float32
	CreatedAt time.Time
	MessageID uuid.UUID
}

// SearchHit is one message found.
type SearchHit struct {
	ThreadID    uuid.UUID
	ThreadTitle *string
	MessageID   uuid.UUID
	Role        string
	CreatedAt   time.Time
	// Snippet is plain text around the match; Highlights are the matched
	// ranges in it, [start, end) in Unicode code points, in order and
	// apart.
	Snippet    string
	Highlights [][2]int
	// Score is the hit's rank (higher is better); Cursor's key with
	// CreatedAt and MessageID.
	Score float32
}
