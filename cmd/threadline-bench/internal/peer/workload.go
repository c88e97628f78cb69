package peer

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/cmd/threadline-bench/internal/bench"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
)

// run runs the whole workload into res: the warm-up, the fresh thread in
// process and over HTTP, tokens/s, then every thread length N. It returns
// the first error of a run, a read or a size query, with what was measured.
func (b *peerBench) run(ctx context.Context, res *Result, progress func(string, ...any)) error {
	o := b.opt
	res.Settings = b.settings()
	res.Measured = measuredDescriptions()
	if err := b.warmUpInProc(ctx, progress); err != nil {
		return err
	}
	if err := b.freshInProc(ctx, res, progress); err != nil {
		return err
	}
	if err := b.freshHTTP(ctx, res, progress); err != nil {
		return err
	}
	if err := b.tokensPerS(ctx, res, progress); err != nil {
		return err
	}
	for _, n := range o.ns {
		nr, err := b.perN(ctx, n, progress)
		if err != nil {
			return fmt.Errorf("thread length N=%d: %w", n, err)
		}
		res.ByN[strconv.Itoa(n)] = nr
	}
	res.CommitMS = bench.Round(median(b.commits), 3)
	res.Peer, res.Targets = comparePeer(res, o.ns)
	return nil
}

// settings is the workload's settings as the result reports them.
func (b *peerBench) settings() map[string]any {
	o := b.opt
	return map[string]any{
		"reply_tokens": peerReplyTokens, "token_bytes": 5, "user_message_bytes": peerUserBytes, "model_delay": "0",
		"fresh_turns": o.freshTurns, "warmup_turns": o.warmupTurns, "reps": o.reps, "tokens_per_s_run": o.bigTokens,
		"end_turns": o.endTurns, "n": o.ns, "caller": peerCaller,
	}
}

// measuredDescriptions says, for every figure of the result, what was timed
// or counted.
func measuredDescriptions() map[string]string {
	return map[string]string{
		"turn_ms":             "in-process engine.Service: StartRun (user message under the current leaf) + FollowRun to the final snapshot, which is published after the reply, the compacted event log and the run's end are committed; median of the fresh turns",
		"http_turn_ms":        "POST /api/v1/threads/{id}/runs/stream on an in-process server on 127.0.0.1, every NDJSON line decoded, to the end of the stream; median of the fresh turns",
		"bytes_per_turn":      "growth of sum(pg_total_relation_size) over every table of the bench database (threads, checkpoints, runs, run_events, attachments, schema_migrations: heap, TOAST, indexes, FSM/VM) during the fresh turns, divided by them; the tables are vacuumed once before the workload, as the store's connection warm-ups leave rolled-back rows and, when they contend, pages added at once; dead row versions of updated rows and of the replaced live event log count until autovacuum (left at the server's settings) makes their space reusable; sizes move in 8 KiB pages, so a short window is coarse and can even shrink when autovacuum truncates a table (file sizes change when pages are added, so no CHECKPOINT is needed)",
		"row_bytes_per_turn":  "sum of pg_column_size of the fresh thread's live rows (thread, checkpoints, runs, run_events) divided by the turns: the data itself, without indexes, page overhead or dead versions",
		"tokens_per_s":        "one run of tokens_per_s_run tokens in-process, token events counted at the FollowRun consumer, from StartRun to the end of the stream; median of reps runs",
		"http_tokens_per_s":   "the same over HTTP, every NDJSON line decoded by the client; median of reps runs",
		"get_state_ms":        "in-process Service.Snapshot + Export (path to the head and the whole repository, what GET /messages serialises) on a new Service with an empty tree cache, so every checkpoint is read from Postgres; median of reps",
		"get_state_warm_ms":   "the same on the bench's long-lived Service (tree cache warm: two small queries)",
		"http_get_state_ms":   "GET /messages over HTTP, decoded, on a server with an empty tree cache",
		"history_ms":          "GET /checkpoints over HTTP (the complete checkpoint tree), decoded, on a server with an empty tree cache; median of reps",
		"history_warm_ms":     "the same on the server with the warm tree cache",
		"fork_ms":             "in-process regenerate of assistant reply mid = ceil(N/2) (parent = the user message above it, source = the reply) to the final snapshot; median of reps (each adds a sibling)",
		"edit_ms":             "in-process edit of user message mid (parent = its parent, source = it), the model answers, to the final snapshot; median of reps",
		"commit_ms":           "this machine's durable commit at the time: a one-row INSERT and its commit on an idle connection (its own table, outside the sizes), right after each fork and each edit; median (per N in by_n, over all N at the top). Every turn, fork and edit includes one such commit: the peer's figures did too, on a machine whose commit time PEER_WORKLOAD.md does not give",
		"persisted_ok":        "each fork/edit is read back, after all repetitions of its N (untimed), from a snapshot of a new Service (from Postgres) and compared with the stream: reply id, text (also equal to the built-in model's text for that prompt), parent ids, role, status, run id, the edited user message's text and parent, and the head path ending at the new reply, with the head the thread stored right after that run",
		"thread_stored_bytes": "growth of sum(pg_total_relation_size) while the N thread was built (N turns); thread_row_bytes: its live rows as row_bytes_per_turn",
		"turn_end_ms":         "in-process turn appended under the N thread's main leaf (after the forks and edits); median of end_turns turns; bytes_per_turn_end: size growth over those turns divided by them",
	}
}

// warmUpInProc runs the in-process warm-up turns on a thread of their own.
// It returns the first turn's error.
func (b *peerBench) warmUpInProc(ctx context.Context, progress func(string, ...any)) error {
	warmID := uuid.New()
	leaf := uuid.Nil
	var warmMS []float64
	for i := 0; i < b.opt.warmupTurns; i++ {
		r, err := b.turn(ctx, warmID, leaf)
		if err != nil {
			return fmt.Errorf("warm-up turn: %w", err)
		}
		leaf = r.run.MessageID
		warmMS = append(warmMS, ms(r.elapsed))
	}
	progress("warm-up: %d in-process turns on another thread (%s ms)", b.opt.warmupTurns, fmtList(warmMS))
	return nil
}

// freshInProc measures turn_ms, bytes_per_turn (in all and by table),
// row_bytes_per_turn and the store calls per turn on a fresh thread, in
// process. It returns the first error of a turn or a size query.
func (b *peerBench) freshInProc(ctx context.Context, res *Result, progress func(string, ...any)) error {
	o := b.opt
	freshID := uuid.New()
	before, err := b.totalSize(ctx)
	if err != nil {
		return err
	}
	tablesBefore, err := b.tableSizes(ctx)
	if err != nil {
		return err
	}
	b.timed.reset()
	connsBefore := b.st.Pool().Stat().NewConnsCount()
	turnMS, err := b.freshTurnsInProc(ctx, freshID)
	if err != nil {
		return err
	}
	res.TurnBreakdown = b.timed.perTurn(o.freshTurns, sum(turnMS))
	res.TurnBreakdown["new_db_conns"] = float64(b.st.Pool().Stat().NewConnsCount() - connsBefore)
	after, err := b.totalSize(ctx)
	if err != nil {
		return err
	}
	rows, err := b.rowBytes(ctx, freshID)
	if err != nil {
		return err
	}
	tablesAfter, err := b.tableSizes(ctx)
	if err != nil {
		return err
	}
	res.BytesPerTurnTables = map[string]float64{}
	for name, size := range tablesAfter {
		if d := size - tablesBefore[name]; d != 0 {
			res.BytesPerTurnTables[name] = bench.Round(float64(d)/float64(o.freshTurns), 1)
		}
	}
	res.TurnMS = bench.Round(median(turnMS), 3)
	res.BytesPerTurn = bench.Round(float64(after-before)/float64(o.freshTurns), 1)
	res.RowBytesPerTurn = bench.Round(float64(rows)/float64(o.freshTurns), 1)
	progress("fresh thread, in-process: %d turns, turn_ms median %.3f (%s ms); bytes_per_turn %.0f (total size %d -> %d); row_bytes_per_turn %.0f",
		o.freshTurns, res.TurnMS, fmtList(turnMS), res.BytesPerTurn, before, after, res.RowBytesPerTurn)
	progress("fresh thread, in-process: bytes_per_turn by table (heap, TOAST and indexes): %v", res.BytesPerTurnTables)
	progress("fresh thread, in-process: store calls per turn (count, ms): %s", fmtBreakdown(res.TurnBreakdown))
	return nil
}

// freshTurnsInProc runs the fresh turns in process, each under the
// previous reply, and returns their times in ms. It returns an error when a
// turn fails or streams another reply than the workload's.
func (b *peerBench) freshTurnsInProc(ctx context.Context, threadID uuid.UUID) ([]float64, error) {
	leaf := uuid.Nil
	var turnMS []float64
	for i := 0; i < b.opt.freshTurns; i++ {
		r, err := b.turn(ctx, threadID, leaf)
		if err != nil {
			return nil, fmt.Errorf("fresh turn %d: %w", i+1, err)
		}
		if r.tokens != peerReplyTokens || len(r.text) != peerReplyTokens*5 {
			return nil, fmt.Errorf("fresh turn %d streamed %d tokens (%d bytes), want %d tokens of 5 bytes", i+1, r.tokens, len(r.text), peerReplyTokens)
		}
		leaf = r.run.MessageID
		turnMS = append(turnMS, ms(r.elapsed))
	}
	return turnMS, nil
}

// freshHTTP measures http_turn_ms on a fresh thread over HTTP, after
// warm-up turns over HTTP on another thread. It returns the first turn's
// error, or one when a turn streams another number of tokens.
func (b *peerBench) freshHTTP(ctx context.Context, res *Result, progress func(string, ...any)) error {
	o := b.opt
	hwarm := uuid.New()
	leaf := uuid.Nil
	for i := 0; i < o.warmupTurns; i++ {
		r, err := b.httpTurn(ctx, hwarm, leaf)
		if err != nil {
			return fmt.Errorf("HTTP warm-up turn: %w", err)
		}
		leaf = r.headID
	}
	hfresh := uuid.New()
	leaf = uuid.Nil
	var httpMS []float64
	for i := 0; i < o.freshTurns; i++ {
		r, err := b.httpTurn(ctx, hfresh, leaf)
		if err != nil {
			return fmt.Errorf("HTTP fresh turn %d: %w", i+1, err)
		}
		if r.tokens != peerReplyTokens {
			return fmt.Errorf("HTTP fresh turn %d streamed %d tokens, want %d", i+1, r.tokens, peerReplyTokens)
		}
		leaf = r.headID
		httpMS = append(httpMS, ms(r.elapsed))
	}
	res.HTTPTurnMS = bench.Round(median(httpMS), 3)
	progress("fresh thread, HTTP: %d turns, http_turn_ms median %.3f (min %.3f, max %.3f)", o.freshTurns, res.HTTPTurnMS, slices.Min(httpMS), slices.Max(httpMS))
	return nil
}

// tokensPerS measures tokens/s on one long run, in process and over HTTP,
// reps times each. It returns the first run's error, or one when a run
// streams another number of tokens.
func (b *peerBench) tokensPerS(ctx context.Context, res *Result, progress func(string, ...any)) error {
	o := b.opt
	var tps, htps []float64
	for i := 0; i < o.reps; i++ {
		r, err := b.runInProc(ctx, uuid.New(), thread.RunRequest{
			Message: &thread.UserMessage{Content: []checkpoint.Part{{Type: "text", Text: b.userText("long")}}},
			Config:  thread.RunConfig{Model: bigModelName},
		})
		if err != nil {
			return fmt.Errorf("tokens/s run: %w", err)
		}
		if r.tokens != o.bigTokens || r.badIDs > 0 {
			return fmt.Errorf("tokens/s run: %d tokens (%d naming another message), want %d", r.tokens, r.badIDs, o.bigTokens)
		}
		tps = append(tps, float64(r.tokens)/r.elapsed.Seconds())
		h, err := b.runHTTP(ctx, uuid.New(), map[string]any{
			"message": map[string]any{"content": b.userText("long")}, "run_config": map[string]any{"model": bigModelName}})
		if err != nil {
			return fmt.Errorf("HTTP tokens/s run: %w", err)
		}
		if h.tokens != o.bigTokens {
			return fmt.Errorf("HTTP tokens/s run: %d tokens, want %d", h.tokens, o.bigTokens)
		}
		htps = append(htps, float64(h.tokens)/h.elapsed.Seconds())
	}
	res.TokensPerS = bench.Round(median(tps), 0)
	res.HTTPTokensPerS = bench.Round(median(htps), 0)
	progress("tokens/s: runs of %d tokens: in-process median %.0f (%s), HTTP median %.0f (%s)",
		o.bigTokens, res.TokensPerS, fmtList(tps), res.HTTPTokensPerS, fmtList(htps))
	return nil
}

// nThread is a thread built of n turns on the main branch.
type nThread struct {
	id        uuid.UUID
	users     []uuid.UUID // the user message of every turn, in order
	replies   []uuid.UUID // the reply of every turn, in order
	userTexts []string    // the text of every user message, in order
}

// perN builds a thread of n turns and measures on it.
func (b *peerBench) perN(ctx context.Context, n int, progress func(string, ...any)) (*NResult, error) {
	nr := &NResult{}
	th, err := b.buildThread(ctx, n, nr, progress)
	if err != nil {
		return nil, err
	}
	want := 2 * n
	cold, err := b.getState(ctx, th.id, want, nr)
	if err != nil {
		return nil, err
	}
	hist, err := b.history(ctx, th.id, want, nr)
	if err != nil {
		return nil, err
	}
	nr.Checkpoints = want
	progress("N=%d: get_state_ms %.3f cold in-process (%s), %.3f warm, %.3f over HTTP; history_ms %.3f cold over HTTP (%s), %.3f warm",
		n, nr.GetStateMS, fmtList(cold), nr.GetStateWarmMS, nr.HTTPGetStateMS, nr.HistoryMS, fmtList(hist), nr.HistoryWarmMS)
	if err := b.forksAndEdits(ctx, th, nr, progress); err != nil {
		return nil, err
	}
	if err := b.turnsAtEnd(ctx, th, nr, progress); err != nil {
		return nil, err
	}
	return nr, nil
}

// buildThread builds a thread of n turns, each under the previous reply,
// into nr's build figures (time per turn, stored and row bytes). It returns
// the first error of a turn or a size query.
func (b *peerBench) buildThread(ctx context.Context, n int, nr *NResult, progress func(string, ...any)) (*nThread, error) {
	th := &nThread{
		id:        uuid.New(),
		users:     make([]uuid.UUID, 0, n),
		replies:   make([]uuid.UUID, 0, n),
		userTexts: make([]string, 0, n),
	}
	before, err := b.totalSize(ctx)
	if err != nil {
		return nil, err
	}
	leaf := uuid.Nil
	var buildMS []float64
	for i := 0; i < n; i++ {
		text := b.userText("turn")
		r, err := b.runInProc(ctx, th.id, thread.RunRequest{
			Message:  &thread.UserMessage{Content: []checkpoint.Part{{Type: "text", Text: text}}},
			ParentID: leaf,
		})
		if err != nil {
			return nil, fmt.Errorf("build turn %d: %w", i+1, err)
		}
		th.users = append(th.users, r.run.UserMessageID)
		th.replies = append(th.replies, r.run.MessageID)
		th.userTexts = append(th.userTexts, text)
		leaf = r.run.MessageID
		buildMS = append(buildMS, ms(r.elapsed))
	}
	after, err := b.totalSize(ctx)
	if err != nil {
		return nil, err
	}
	nr.ThreadStoredBytes = after - before
	if nr.ThreadRowBytes, err = b.rowBytes(ctx, th.id); err != nil {
		return nil, err
	}
	nr.BuildTurnMS = bench.Round(median(buildMS), 3)
	progress("N=%d: built with %d turns (median %.3f ms, last %.3f ms); thread_stored_bytes %d (live rows %d)",
		n, n, nr.BuildTurnMS, buildMS[len(buildMS)-1], nr.ThreadStoredBytes, nr.ThreadRowBytes)
	return th, nil
}

// getState measures reading the thread's state reps times: cold (a new
// Service), warm (the bench's) and over HTTP (cold), into nr. It returns
// the cold in-process times in ms, or the first read's error, or one when
// a read does not hold want messages.
func (b *peerBench) getState(ctx context.Context, threadID uuid.UUID, want int, nr *NResult) ([]float64, error) {
	var cold, warm, httpCold []float64
	for i := 0; i < b.opt.reps; i++ {
		c, err := b.snapshotMS(ctx, b.newService(), threadID, want, true)
		if err != nil {
			return nil, err
		}
		cold = append(cold, c)
		w, err := b.snapshotMS(ctx, b.svc, threadID, want, false)
		if err != nil {
			return nil, err
		}
		warm = append(warm, w)
		h, err := b.httpMessagesMS(ctx, threadID, want)
		if err != nil {
			return nil, err
		}
		httpCold = append(httpCold, h)
	}
	nr.GetStateMS, nr.GetStateWarmMS, nr.HTTPGetStateMS = bench.Round(median(cold), 3), bench.Round(median(warm), 3), bench.Round(median(httpCold), 3)
	return cold, nil
}

// snapshotMS times svc's Snapshot and Export of the thread and returns it
// in ms. It returns Snapshot's error, or one when the path (and, when
// wholeRepo, the repository) does not hold want messages.
func (b *peerBench) snapshotMS(ctx context.Context, svc *engine.Service, threadID uuid.UUID, want int, wholeRepo bool) (float64, error) {
	t0 := time.Now()
	snap, err := svc.Snapshot(ctx, peerCaller, threadID)
	if err != nil {
		return 0, fmt.Errorf("snapshot: %w", err)
	}
	_, path, repo := snap.Export()
	d := ms(time.Since(t0))
	switch {
	case wholeRepo && (len(path) != want || len(repo.Messages) != want):
		return 0, fmt.Errorf("snapshot: path of %d and repository of %d messages, want %d", len(path), len(repo.Messages), want)
	case !wholeRepo && len(path) != want:
		return 0, fmt.Errorf("warm snapshot: path of %d messages, want %d", len(path), want)
	}
	return d, nil
}

// httpMessagesMS times GET /messages of the thread on a server with an
// empty tree cache and returns it in ms. It returns the request's error, or
// one when the answer does not hold want messages.
func (b *peerBench) httpMessagesMS(ctx context.Context, threadID uuid.UUID, want int) (float64, error) {
	b.coldH.Store(b.newColdServer())
	var msgs struct {
		Messages          []json.RawMessage `json:"messages"`
		MessageRepository struct {
			HeadID   *string `json:"headId"`
			Messages []struct {
				Message  json.RawMessage `json:"message"`
				ParentID *string         `json:"parentId"`
			} `json:"messages"`
		} `json:"messageRepository"`
	}
	t0 := time.Now()
	if err := b.getJSON(ctx, b.cold+"/api/v1/threads/"+threadID.String()+"/messages", &msgs); err != nil {
		return 0, err
	}
	d := ms(time.Since(t0))
	if len(msgs.Messages) != want || len(msgs.MessageRepository.Messages) != want {
		return 0, fmt.Errorf("GET /messages: %d messages, %d in the repository, want %d", len(msgs.Messages), len(msgs.MessageRepository.Messages), want)
	}
	return d, nil
}

// history measures GET /checkpoints reps times, cold then warm, into nr.
// It returns the cold times in ms, or the first request's error, or one
// when an answer does not hold want checkpoints.
func (b *peerBench) history(ctx context.Context, threadID uuid.UUID, want int, nr *NResult) ([]float64, error) {
	var hist, histWarm []float64
	for i := 0; i < b.opt.reps; i++ {
		c, err := b.checkpointsMS(ctx, threadID, want, true)
		if err != nil {
			return nil, err
		}
		hist = append(hist, c)
		w, err := b.checkpointsMS(ctx, threadID, want, false)
		if err != nil {
			return nil, err
		}
		histWarm = append(histWarm, w)
	}
	nr.HistoryMS, nr.HistoryWarmMS = bench.Round(median(hist), 3), bench.Round(median(histWarm), 3)
	return hist, nil
}

// checkpointsMS times GET /checkpoints of the thread, on a server with an
// empty tree cache when cold, else on the warm one, and returns it in ms.
// It returns the request's error, or one when the answer does not hold want
// checkpoints.
func (b *peerBench) checkpointsMS(ctx context.Context, threadID uuid.UUID, want int, cold bool) (float64, error) {
	base := b.warm
	if cold {
		b.coldH.Store(b.newColdServer())
		base = b.cold
	}
	var cps struct {
		Checkpoints []struct {
			CheckpointID       string          `json:"checkpoint_id"`
			ParentCheckpointID *string         `json:"parent_checkpoint_id"`
			Role               string          `json:"role"`
			Content            json.RawMessage `json:"content"`
		} `json:"checkpoints"`
	}
	t0 := time.Now()
	if err := b.getJSON(ctx, base+"/api/v1/threads/"+threadID.String()+"/checkpoints", &cps); err != nil {
		return 0, err
	}
	d := ms(time.Since(t0))
	if len(cps.Checkpoints) != want {
		return 0, fmt.Errorf("GET /checkpoints: %d checkpoints, want %d", len(cps.Checkpoints), want)
	}
	return d, nil
}

// forksAndEdits regenerates the thread's reply mid = ceil(N/2) and edits
// its user message mid, in turns, so that neither always runs first after
// the reads before, reps times each; then reads every one back and checks
// it. The figures and what did not persist as streamed go into nr. It
// returns the first error of a run, a commit probe or a head read.
func (b *peerBench) forksAndEdits(ctx context.Context, th *nThread, nr *NResult, progress func(string, ...any)) error {
	n := len(th.users)
	mid := (n + 1) / 2
	userMid, replyMid := th.users[mid-1], th.replies[mid-1]
	userParent := uuid.Nil
	if mid > 1 {
		userParent = th.replies[mid-2]
	}
	fe := &forkEdits{b: b, threadID: th.id}
	b.timed.reset()
	for i := 0; i < b.opt.reps; i++ {
		if err := fe.fork(ctx, userMid, replyMid, th.userTexts[mid-1]); err != nil {
			return err
		}
		if err := fe.edit(ctx, userParent, userMid); err != nil {
			return err
		}
	}
	fe.verify(ctx, nr)
	nr.ForkMS, nr.EditMS, nr.CommitMS = bench.Round(median(fe.forkMS), 3), bench.Round(median(fe.editMS), 3), bench.Round(median(fe.commitMS), 3)
	b.commits = append(b.commits, fe.commitMS...)
	nr.ForkEditBreakdown = b.timed.perTurn(len(fe.forkMS)+len(fe.editMS), sum(fe.forkMS)+sum(fe.editMS))
	progress("N=%d: mid %d: fork_ms %.3f (%s) persisted %v; edit_ms %.3f (%s) persisted %v; store calls per fork or edit (count, ms): %s; a bare commit after each: %.3f ms",
		n, mid, nr.ForkMS, fmtList(fe.forkMS), nr.ForkPersistedOK, nr.EditMS, fmtList(fe.editMS), nr.EditPersistedOK, fmtBreakdown(nr.ForkEditBreakdown), nr.CommitMS)
	for _, p := range nr.PersistProblems {
		progress("N=%d: NOT PERSISTED AS STREAMED: %s", n, p)
	}
	return nil
}

// forkEdits is one N's forks and edits as they run: their times, a bare
// commit's time after each, and what each wrote, to be read back after all
// of them ran. At N = 500 a read-back is a snapshot of 1,000 messages, far
// slower than at N = 10, and a timed write right after it (or after any
// pause) is slower on this VM, which would make the flat-in-N line measure
// the bench's own check rather than the fork.
type forkEdits struct {
	b                        *peerBench
	threadID                 uuid.UUID
	forkMS, editMS, commitMS []float64
	done                     []written
}

// written is what one fork or edit wrote, as verify checks it.
type written struct {
	r          runResult
	parent     uuid.UUID
	prompt     string
	userParent *uuid.UUID
	what       string
	head       uuid.UUID // the thread's stored head right after the run
}

// fork regenerates the reply source to the user message parent (whose
// text is prompt) and records it. It returns the run's error, or
// record's.
func (f *forkEdits) fork(ctx context.Context, parent, source uuid.UUID, prompt string) error {
	r, err := f.b.runInProc(ctx, f.threadID, thread.RunRequest{ParentID: parent, SourceID: source})
	if err != nil {
		return fmt.Errorf("fork: %w", err)
	}
	f.forkMS = append(f.forkMS, ms(r.elapsed))
	return f.record(ctx, written{r: r, parent: parent, prompt: prompt, what: "fork"})
}

// edit sends a new user message in place of source, under parent, and
// records the run that answers it. It returns the run's error, or
// record's.
func (f *forkEdits) edit(ctx context.Context, parent, source uuid.UUID) error {
	text := f.b.userText("edit")
	r, err := f.b.runInProc(ctx, f.threadID, thread.RunRequest{
		Message:  &thread.UserMessage{Content: []checkpoint.Part{{Type: "text", Text: text}}},
		ParentID: parent, SourceID: source,
	})
	if err != nil {
		return fmt.Errorf("edit: %w", err)
	}
	f.editMS = append(f.editMS, ms(r.elapsed))
	return f.record(ctx, written{r: r, parent: r.run.UserMessageID, prompt: text, userParent: &parent, what: "edit"})
}

// record times a bare commit, then reads the thread's row alone (one small
// read at every N) for its head, the branch a reloaded client would show,
// and keeps w with it for verify. It returns the probe's or the read's
// error.
func (f *forkEdits) record(ctx context.Context, w written) error {
	d, err := f.b.probeCommit(ctx)
	f.commitMS = append(f.commitMS, d)
	if err != nil {
		return err
	}
	th, err := f.b.st.ThreadGet(ctx, peerCaller, f.threadID)
	if err != nil {
		return fmt.Errorf("read head: %w", err)
	}
	w.head = th.HeadID
	f.done = append(f.done, w)
	return nil
}

// verify reads every fork and edit back and sets nr's persisted flags and
// problems.
func (f *forkEdits) verify(ctx context.Context, nr *NResult) {
	nr.ForkPersistedOK, nr.EditPersistedOK = true, true
	for _, w := range f.done {
		if problem := f.b.verify(ctx, f.threadID, w.r, w.parent, w.prompt, w.userParent, w.head); problem != "" {
			if w.what == "fork" {
				nr.ForkPersistedOK = false
			} else {
				nr.EditPersistedOK = false
			}
			nr.PersistProblems = append(nr.PersistProblems, w.what+": "+problem)
		}
	}
}

// turnsAtEnd appends the end turns under the thread's main leaf (after the
// forks and edits) and puts turn_end_ms and bytes_per_turn_end into nr. It
// returns the first error of a turn or a size query.
func (b *peerBench) turnsAtEnd(ctx context.Context, th *nThread, nr *NResult, progress func(string, ...any)) error {
	o := b.opt
	leaf := th.replies[len(th.replies)-1]
	before, err := b.totalSize(ctx)
	if err != nil {
		return err
	}
	var endMS []float64
	for i := 0; i < o.endTurns; i++ {
		r, err := b.turn(ctx, th.id, leaf)
		if err != nil {
			return fmt.Errorf("end turn: %w", err)
		}
		leaf = r.run.MessageID
		endMS = append(endMS, ms(r.elapsed))
	}
	after, err := b.totalSize(ctx)
	if err != nil {
		return err
	}
	nr.TurnEndMS = bench.Round(median(endMS), 3)
	nr.BytesPerTurnEnd = bench.Round(float64(after-before)/float64(o.endTurns), 1)
	progress("N=%d: turn_end_ms %.3f (%s); bytes_per_turn_end %.0f", len(th.users), nr.TurnEndMS, fmtList(endMS), nr.BytesPerTurnEnd)
	return nil
}
