package store

// Search over every checkpoint of a caller's threads: the full-text and
// trigram indexes of checkpoint_search (migration 0017), which the search
// indexer (searchindex.go) fills after each commit.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// Highlight markers ts_headline puts around a match: private-use
// characters, stripped from the text first, that MessageSearch turns into
// Highlights.
const (
	markOpen  = '\uE000'
	markClose = '\uE001'
)

// substringScore is the score of a hit found only as a substring (a part
// of an identifier); a word match scores it plus its ts_rank, so it ranks
// above every substring-only hit.
const substringScore = 0.001

// maxSnippetRunes caps a snippet.
const maxSnippetRunes = 320

// Defaults of searchTuning.
const (
	// searchWindow is how many matches of a common query are ranked.
	searchWindow = 500
	// searchCommonShare is the share of all messages the planner must
	// expect a query to match for it to be common.
	searchCommonShare = 0.1
	// searchCommonMinRows is the fewest messages a database must hold
	// for any query to be common: below it every match is ranked.
	searchCommonMinRows = 50000
)

// searchTuning says when a query is common and how many of its matches
// are ranked. A query of a word most messages hold would otherwise read
// and rank every message of the caller that holds it.
type searchTuning struct {
	window  int     // matches ranked (0: searchWindow)
	share   float64 // expected share of matches (0: searchCommonShare)
	minRows float64 // fewest messages (0: searchCommonMinRows; < 0: none)
}

func (t searchTuning) get() searchTuning {
	if t.window == 0 {
		t.window = searchWindow
	}
	if t.share == 0 {
		t.share = searchCommonShare
	}
	if t.minRows == 0 {
		t.minRows = searchCommonMinRows
	}
	return t
}

// searchTerms is a query split for SQL: the words and phrases for
// websearch_to_tsquery, the prefixes for to_tsquery, and the substring for
// the trigram index ("" when the query is not one word).
type searchTerms struct {
	web      string
	prefixes []string
	substr   string
}

// parseSearch splits text. Outside quotes, a word ending in * is a prefix;
// the rest goes to websearch_to_tsquery as written.
func parseSearch(text string) searchTerms {
	var t searchTerms
	var web []string
	inQuote := false
	for _, f := range strings.Fields(text) {
		if strings.Count(f, `"`)%2 == 1 {
			inQuote = !inQuote
		}
		if !inQuote && strings.HasSuffix(f, "*") && !strings.HasPrefix(f, "-") && !strings.Contains(f, `"`) {
			if w := wordChars(f); w != "" {
				t.prefixes = append(t.prefixes, w)
				continue
			}
		}
		web = append(web, f)
	}
	t.web = strings.Join(web, " ")
	one := strings.TrimSpace(text)
	if !strings.ContainsAny(one, "\"* \t\n\r") && !strings.HasPrefix(one, "-") && utf8.RuneCountInString(one) >= 3 && codeLike(one) {
		t.substr = one
	}
	return t
}

// codeLike says whether a word looks like a name in code: an upper-case
// letter after its first character (parseConfig), a digit, or one of
// _ . : / - # @ $ (read_file, os.Open, v2). Only such a word is also
// looked for as a substring: looking for a plain word inside every
// message that holds it as a word would read each of them.
func codeLike(s string) bool {
	for i, r := range s {
		if (i > 0 && unicode.IsUpper(r)) || unicode.IsDigit(r) || strings.ContainsRune("_.:/-#@$", r) {
			return true
		}
	}
	return false
}

// wordChars keeps the letters, digits and underscores of s, so that it is
// a safe lexeme of to_tsquery between single quotes.
func wordChars(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' {
			return r
		}
		return -1
	}, s)
}

// likeEscape escapes ILIKE's wildcards.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// sqlArgs numbers a query's arguments as it is built.
type sqlArgs []any

func (a *sqlArgs) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// tsqueryExpr is the tsquery of t's words and prefixes, its arguments
// numbered by a ("" when t has none).
func tsqueryExpr(t searchTerms, a *sqlArgs) string {
	var tsq []string
	if wordChars(t.web) != "" {
		tsq = append(tsq, "websearch_to_tsquery('english', "+a.add(t.web)+")")
	}
	if len(t.prefixes) > 0 {
		ps := make([]string, len(t.prefixes))
		for i, p := range t.prefixes {
			ps[i] = "'" + p + "':*"
		}
		tsq = append(tsq, "to_tsquery('english', "+a.add(strings.Join(ps, " & "))+")")
	}
	if len(tsq) == 0 {
		return ""
	}
	return "(" + strings.Join(tsq, " && ") + ")"
}

// searchSQL builds the query of q for caller over checkpoint_search
// (migration 0017), which holds the caller, role and time of each
// indexed checkpoint: the filters are read there, and the checkpoints and
// threads are read only for the page's rows (snippet and title). ranked >
// 0 ranks only the first ranked matches found going through the caller's
// threads from the most recently active, each thread's newest message
// first (for a common query, see MessageSearch); 0 ranks every match.
func searchSQL(caller string, q thread.SearchQuery, ranked int) (string, []any, bool) {
	t := parseSearch(q.Text)
	var a sqlArgs
	callerArg := a.add(caller)
	tsqExpr := tsqueryExpr(t, &a)
	words := tsqExpr != ""
	if !words {
		tsqExpr = "''::tsquery"
	}
	match := "c.tsv @@ " + tsqExpr
	score := "ts_rank(c.tsv, " + tsqExpr + ", 1)"
	substrArg := "''"
	if t.substr != "" {
		// A word match ranks above any substring match; the substring is
		// not looked for again in a word match (that would read the
		// message's text for every hit of a common word).
		substrArg = a.add(t.substr)
		pat := a.add("%" + likeEscape(t.substr) + "%")
		// code holds every code-like word (search_code_text), so every
		// place a code-like query is a substring of.
		like := "c.code ILIKE " + pat
		score = "CASE WHEN " + match + " THEN " + strconv.FormatFloat(substringScore, 'f', -1, 64) + " + " + score +
			" ELSE " + strconv.FormatFloat(substringScore, 'f', -1, 64) + " END"
		match = "(" + match + " OR " + like + ")"
	}
	threads := "SELECT id FROM threads WHERE caller = " + callerArg
	// The caller leads both search indexes: each is read for the caller's
	// entries only.
	where := []string{match, "c.caller = " + callerArg}
	if q.Title != "" {
		threads += " AND title ILIKE " + a.add("%"+likeEscape(q.Title)+"%")
		where = append(where, "c.thread_id = ANY (ARRAY("+threads+"))")
	}
	if !q.From.IsZero() {
		where = append(where, "c.created_at >= "+a.add(q.From.UTC()))
	}
	if !q.To.IsZero() {
		where = append(where, "c.created_at < "+a.add(q.To.UTC()))
	}
	if q.Role != "" {
		where = append(where, "c.role = "+a.add(q.Role))
	}
	from := "checkpoint_search c WHERE " + strings.Join(where, " AND ")
	if ranked > 0 && t.substr == "" {
		// The threads newest first and each one's messages newest first,
		// until ranked matches: the match is a filter here (IS TRUE keeps
		// the planner off the full-text index, which would be read again
		// for every thread), so only the messages up to the last match
		// ranked are read.
		// The threads are the caller's already: the caller is not asked
		// for again, which would read its index entries for each thread.
		where[0], where[1] = "("+match+") IS TRUE", "c.thread_id = t.id"
		from = "(SELECT c.* FROM (" + threads + " ORDER BY updated_at DESC) t CROSS JOIN LATERAL (SELECT c.* FROM checkpoint_search c WHERE " +
			strings.Join(where, " AND ") + " ORDER BY c.seq DESC) c LIMIT " + a.add(ranked) + ") c"
	}
	keyset := "true"
	if q.After != nil {
		s, ca, id := a.add(q.After.Score), a.add(q.After.CreatedAt.UTC()), a.add(q.After.MessageID)
		keyset = "(s.score < " + s + " OR (s.score = " + s + " AND (s.created_at, s.id) < (" + ca + ", " + id + ")))"
	}
	limit := a.add(q.Limit)
	headline := `ts_headline('english', replace(replace(d.doc, E'\uE000', ''), E'\uE001', ''), ` + tsqExpr +
		`, 'StartSel=` + string(markOpen) + `, StopSel=` + string(markClose) +
		`, MaxWords=30, MinWords=12, ShortWord=2, MaxFragments=2, FragmentDelimiter=" … "')`
	window := "''"
	if t.substr != "" {
		window = `CASE WHEN strpos(lower(d.doc), lower(` + substrArg + `)) > 0 THEN substr(d.doc, greatest(1, strpos(lower(d.doc), lower(` +
			substrArg + `)) - 80), 200) ELSE '' END`
	}
	sql := `SELECT p.thread_id, t.title, p.id, p.role, p.created_at, p.score, ` + headline + `, ` + window + `
	FROM (SELECT s.* FROM (
		SELECT c.thread_id, c.checkpoint_id AS id, c.role, c.created_at, (` + score + `)::real AS score
		FROM ` + from + `
	) s WHERE ` + keyset + ` ORDER BY s.score DESC, s.created_at DESC, s.id DESC LIMIT ` + limit + `) p
	JOIN threads t ON t.id = p.thread_id AND t.caller = ` + callerArg + `
	JOIN checkpoints k ON k.thread_id = p.thread_id AND k.id = p.id,
	LATERAL (SELECT checkpoint_search_text(k.content) AS doc) d
	ORDER BY p.score DESC, p.created_at DESC, p.id DESC`
	return sql, a, words || t.substr != ""
}

// searchRanked is how many matches of q to rank: 0 (all) unless the
// planner expects q to match a large share of a large table's messages
// (a common word), read from its statistics without running the query.
// A query that looks like code (also a substring) ranks all.
func (s *Store) searchRanked(ctx context.Context, q thread.SearchQuery) (int, error) {
	t := parseSearch(q.Text)
	var a sqlArgs
	expr := tsqueryExpr(t, &a)
	if t.substr != "" || expr == "" {
		return 0, nil
	}
	tun := s.search.get()
	b := &pgx.Batch{}
	var rows float64
	var plan string
	b.Queue(`SELECT reltuples FROM pg_class WHERE oid = 'checkpoint_search'::regclass`).QueryRow(func(r pgx.Row) error { return r.Scan(&rows) })
	b.Queue(`EXPLAIN (FORMAT JSON) SELECT 1 FROM checkpoint_search c WHERE c.tsv @@ `+expr, a...).QueryRow(func(r pgx.Row) error { return r.Scan(&plan) })
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, fmt.Errorf("estimate: %w", err)
	}
	var p []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		}
	}
	if err := json.Unmarshal([]byte(plan), &p); err != nil || len(p) == 0 {
		return 0, fmt.Errorf("estimate: plan %q: %w", plan, err)
	}
	if rows < tun.minRows || p[0].Plan.Rows/max(rows, 1) < tun.share {
		return 0, nil
	}
	return tun.window, nil
}

// MessageSearch returns a page of the caller's messages that match q, on
// every branch of every thread, best first: invalid_request when q has
// nothing to search for. Another caller's threads are never read. A
// common query (see searchRanked) ranks only the first matches found going
// back from the caller's most recently active thread.
func (s *Store) MessageSearch(ctx context.Context, caller string, q thread.SearchQuery) ([]thread.SearchHit, error) {
	ranked, err := s.searchRanked(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("search: %w", interpretError(err))
	}
	sql, args, ok := searchSQL(caller, q, ranked)
	if !ok {
		return nil, errcode.New(errcode.Invalid, "q has no words to search for")
	}
	// An unnamed statement: planned for these arguments each time. A
	// cached statement would move to a generic plan after five runs,
	// blind to how common the words are and whose threads are read.
	rows, err := s.pool.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("search: %w", interpretError(err))
	}
	substr := parseSearch(q.Text).substr
	hits, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (thread.SearchHit, error) {
		var h thread.SearchHit
		var headline, window string
		if err := r.Scan(&h.ThreadID, &h.ThreadTitle, &h.MessageID, &h.Role, &h.CreatedAt, &h.Score, &headline, &window); err != nil {
			return h, err
		}
		h.CreatedAt = h.CreatedAt.UTC()
		h.Snippet, h.Highlights = snippet(headline, window, substr)
		return h, nil
	})
	if err != nil {
		return nil, fmt.Errorf("search: %w", interpretError(err))
	}
	return hits, nil
}

// snippet turns ts_headline's marked text into plain text and ranges.
// When the headline marks nothing but the query's substring was found,
// the text around the substring is the snippet instead, with each
// occurrence marked.
func snippet(headline, window, substr string) (string, [][2]int) {
	text, hl := unmark(headline)
	if len(hl) == 0 && window != "" {
		text, _ = unmark(window)
		if r := []rune(text); len(r) > 0 {
			text = "…" + string(r) + "…"
		}
		hl = occurrences(text, substr)
	}
	return text, hl
}

// unmark collapses white space, cuts the text to maxSnippetRunes and
// returns it without markers, with the marked ranges.
func unmark(s string) (string, [][2]int) {
	var b strings.Builder
	var hl [][2]int
	n, start, space, opening := 0, -1, false, false
	for _, r := range s {
		switch {
		case r == markOpen:
			opening = start < 0
			continue
		case r == markClose:
			if start >= 0 && n > start {
				hl = appendRange(hl, [2]int{start, n})
			}
			start, opening = -1, false
			continue
		case unicode.IsSpace(r):
			space = n > 0
			continue
		}
		if n >= maxSnippetRunes {
			break
		}
		if space {
			b.WriteByte(' ')
			n++
			space = false
		}
		if opening {
			start, opening = n, false
		}
		b.WriteRune(r)
		n++
	}
	if start >= 0 && n > start {
		hl = appendRange(hl, [2]int{start, n})
	}
	return b.String(), hl
}

// appendRange appends r, merging it into the last range when they touch.
func appendRange(hl [][2]int, r [2]int) [][2]int {
	if k := len(hl) - 1; k >= 0 && hl[k][1] >= r[0] {
		hl[k][1] = max(hl[k][1], r[1])
		return hl
	}
	return append(hl, r)
}

// occurrences are the case-insensitive places of sub in text, in runes.
func occurrences(text, sub string) [][2]int {
	tr, sr := []rune(text), []rune(sub)
	var hl [][2]int
	for i := 0; len(sr) > 0 && i+len(sr) <= len(tr); i++ {
		if strings.EqualFold(string(tr[i:i+len(sr)]), sub) {
			hl = append(hl, [2]int{i, i + len(sr)})
			i += len(sr) - 1
		}
	}
	return hl
}
