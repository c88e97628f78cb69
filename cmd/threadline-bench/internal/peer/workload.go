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
)

func (b *peerBench) run(ctx context.Context, res *Result, progress func(string, ...any)) error {
	o := b.opt
	res.Settings = map[string]any{
		"reply_tokens": peerReplyTokens, "token_bytes": 5, "user_message_bytes": peerUserBytes, "model_delay": "0",
		"fresh_turns": o.freshTurns, "warmup_turns": o.warmupTurns, "reps": o.reps, "tokens_per_s_run": o.bigTokens,
		"end_turns": o.endTurns, "n": o.ns, "caller": peerCaller,
	}
	res.Measured = map[string]string{
		"turn_ms":             "in-process thread.Service: StartRun (user message under the current leaf) + FollowRun to the final snapshot, which is published after the reply, the compacted event log and the run's end are committed; median of the fresh turns",
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

	// Warm-up: in-process turns on one thread.
	warmID := uuid.New()
	leaf := uuid.Nil
	var warmMS []float64
	for i := 0; i < o.warmupTurns; i++ {
		r, err := b.turn(ctx, warmID, leaf)
		if err != nil {
			return fmt.Errorf("warm-up turn: %w", err)
		}
		leaf = r.run.MessageID
		warmMS = append(warmMS, ms(r.elapsed))
	}
	progress("warm-up: %d in-process turns on another thread (%s ms)", o.warmupTurns, fmtList(warmMS))

	// Fresh thread: turn_ms and bytes_per_turn.
	freshID := uuid.New()
	before, err := b.totalSize(ctx)
	if err != nil {
		return err
	}
	tablesBefore, err := b.tableSizes(ctx)
	if err != nil {
		return err
	}
	leaf = uuid.Nil
	var turnMS []float64
	b.timed.reset()
	connsBefore := b.st.Pool().Stat().NewConnsCount()
	for i := 0; i < o.freshTurns; i++ {
		r, err := b.turn(ctx, freshID, leaf)
		if err != nil {
			return fmt.Errorf("fresh turn %d: %w", i+1, err)
		}
		if r.tokens != peerReplyTokens || len(r.text) != peerReplyTokens*5 {
			return fmt.Errorf("fresh turn %d streamed %d tokens (%d bytes), want %d tokens of 5 bytes", i+1, r.tokens, len(r.text), peerReplyTokens)
		}
		leaf = r.run.MessageID
		turnMS = append(turnMS, ms(r.elapsed))
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

	// Fresh thread over HTTP, after warm-up turns over HTTP on another thread.
	hwarm := uuid.New()
	leaf = uuid.Nil
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

	// tokens/s: one long run, in-process and over HTTP.
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

// perN builds a thread of n turns and measures on it.
func (b *peerBench) perN(ctx context.Context, n int, progress func(string, ...any)) (*NResult, error) {
	o := b.opt
	nr := &NResult{}
	threadID := uuid.New()
	before, err := b.totalSize(ctx)
	if err != nil {
		return nil, err
	}
	users := make([]uuid.UUID, 0, n)
	replies := make([]uuid.UUID, 0, n)
	userTexts := make([]string, 0, n)
	leaf := uuid.Nil
	var buildMS []float64
	for i := 0; i < n; i++ {
		text := b.userText("turn")
		r, err := b.runInProc(ctx, threadID, thread.RunRequest{
			Message:  &thread.UserMessage{Content: []checkpoint.Part{{Type: "text", Text: text}}},
			ParentID: leaf,
		})
		if err != nil {
			return nil, fmt.Errorf("build turn %d: %w", i+1, err)
		}
		users = append(users, r.run.UserMessageID)
		replies = append(replies, r.run.MessageID)
		userTexts = append(userTexts, text)
		leaf = r.run.MessageID
		buildMS = append(buildMS, ms(r.elapsed))
	}
	after, err := b.totalSize(ctx)
	if err != nil {
		return nil, err
	}
	nr.ThreadStoredBytes = after - before
	if nr.ThreadRowBytes, err = b.rowBytes(ctx, threadID); err != nil {
		return nil, err
	}
	nr.BuildTurnMS = bench.Round(median(buildMS), 3)
	progress("N=%d: built with %d turns (median %.3f ms, last %.3f ms); thread_stored_bytes %d (live rows %d)",
		n, n, nr.BuildTurnMS, buildMS[len(buildMS)-1], nr.ThreadStoredBytes, nr.ThreadRowBytes)
	want := 2 * n

	// get_state: cold (new Service), warm, and over HTTP (cold).
	var cold, warm, httpCold []float64
	for i := 0; i < o.reps; i++ {
		svc := b.newService()
		t0 := time.Now()
		snap, err := svc.Snapshot(ctx, peerCaller, threadID)
		if err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
		_, path, repo := snap.Export()
		cold = append(cold, ms(time.Since(t0)))
		if len(path) != want || len(repo.Messages) != want {
			return nil, fmt.Errorf("snapshot: path of %d and repository of %d messages, want %d", len(path), len(repo.Messages), want)
		}
		t0 = time.Now()
		snap, err = b.svc.Snapshot(ctx, peerCaller, threadID)
		if err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
		_, path, _ = snap.Export()
		warm = append(warm, ms(time.Since(t0)))
		if len(path) != want {
			return nil, fmt.Errorf("warm snapshot: path of %d messages, want %d", len(path), want)
		}
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
		t0 = time.Now()
		if err := b.getJSON(ctx, b.cold+"/api/v1/threads/"+threadID.String()+"/messages", &msgs); err != nil {
			return nil, err
		}
		httpCold = append(httpCold, ms(time.Since(t0)))
		if len(msgs.Messages) != want || len(msgs.MessageRepository.Messages) != want {
			return nil, fmt.Errorf("GET /messages: %d messages, %d in the repository, want %d", len(msgs.Messages), len(msgs.MessageRepository.Messages), want)
		}
	}
	nr.GetStateMS, nr.GetStateWarmMS, nr.HTTPGetStateMS = bench.Round(median(cold), 3), bench.Round(median(warm), 3), bench.Round(median(httpCold), 3)

	// history: GET /checkpoints, cold and warm.
	var hist, histWarm []float64
	for i := 0; i < o.reps; i++ {
		for _, coldRead := range []bool{true, false} {
			base := b.warm
			if coldRead {
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
				return nil, err
			}
			d := ms(time.Since(t0))
			if len(cps.Checkpoints) != want {
				return nil, fmt.Errorf("GET /checkpoints: %d checkpoints, want %d", len(cps.Checkpoints), want)
			}
			if coldRead {
				hist = append(hist, d)
			} else {
				histWarm = append(histWarm, d)
			}
		}
	}
	nr.HistoryMS, nr.HistoryWarmMS = bench.Round(median(hist), 3), bench.Round(median(histWarm), 3)
	nr.Checkpoints = want
	progress("N=%d: get_state_ms %.3f cold in-process (%s), %.3f warm, %.3f over HTTP; history_ms %.3f cold over HTTP (%s), %.3f warm",
		n, nr.GetStateMS, fmtList(cold), nr.GetStateWarmMS, nr.HTTPGetStateMS, nr.HistoryMS, fmtList(hist), nr.HistoryWarmMS)

	mid := (n + 1) / 2
	userMid, replyMid := users[mid-1], replies[mid-1]
	userParent := uuid.Nil
	if mid > 1 {
		userParent = replies[mid-2]
	}

	// fork (regenerate reply mid) and edit (user message mid), in turns, so
	// that neither always runs first after the reads above.
	var forkMS, editMS, commitMS []float64
	probe := func() error {
		d, err := b.probeCommit(ctx)
		commitMS = append(commitMS, d)
		return err
	}
	// Each is read back and checked after all of them ran: at N = 500
	// a read-back is a 5 ms snapshot of 1,000 messages against 0.3 ms at
	// N = 10, and a timed write right after it (or after any pause) is
	// slower on this VM, which would make the flat-in-N line measure the
	// bench's own check rather than the fork.
	type written struct {
		r          runResult
		parent     uuid.UUID
		prompt     string
		userParent *uuid.UUID
		what       string
		head       uuid.UUID // the thread's stored head right after the run
	}
	var done []written
	// head reads the thread's row alone (one small read at every N): the
	// branch a reloaded client would show, checked in verify.
	head := func() (uuid.UUID, error) {
		th, err := b.st.ThreadGet(ctx, peerCaller, threadID)
		if err != nil {
			return uuid.Nil, fmt.Errorf("read head: %w", err)
		}
		return th.HeadID, nil
	}
	b.timed.reset()
	for i := 0; i < o.reps; i++ {
		r, err := b.runInProc(ctx, threadID, thread.RunRequest{ParentID: userMid, SourceID: replyMid})
		if err != nil {
			return nil, fmt.Errorf("fork: %w", err)
		}
		forkMS = append(forkMS, ms(r.elapsed))
		if err := probe(); err != nil {
			return nil, err
		}
		h, err := head()
		if err != nil {
			return nil, err
		}
		done = append(done, written{r: r, parent: userMid, prompt: userTexts[mid-1], what: "fork", head: h})
		text := b.userText("edit")
		r, err = b.runInProc(ctx, threadID, thread.RunRequest{
			Message:  &thread.UserMessage{Content: []checkpoint.Part{{Type: "text", Text: text}}},
			ParentID: userParent, SourceID: userMid,
		})
		if err != nil {
			return nil, fmt.Errorf("edit: %w", err)
		}
		editMS = append(editMS, ms(r.elapsed))
		if err := probe(); err != nil {
			return nil, err
		}
		if h, err = head(); err != nil {
			return nil, err
		}
		done = append(done, written{r: r, parent: r.run.UserMessageID, prompt: text, userParent: &userParent, what: "edit", head: h})
	}
	nr.ForkPersistedOK, nr.EditPersistedOK = true, true
	for _, w := range done {
		if problem := b.verify(ctx, threadID, w.r, w.parent, w.prompt, w.userParent, w.head); problem != "" {
			if w.what == "fork" {
				nr.ForkPersistedOK = false
			} else {
				nr.EditPersistedOK = false
			}
			nr.PersistProblems = append(nr.PersistProblems, w.what+": "+problem)
		}
	}
	nr.ForkMS, nr.EditMS, nr.CommitMS = bench.Round(median(forkMS), 3), bench.Round(median(editMS), 3), bench.Round(median(commitMS), 3)
	b.commits = append(b.commits, commitMS...)
	nr.ForkEditBreakdown = b.timed.perTurn(len(forkMS)+len(editMS), sum(forkMS)+sum(editMS))
	progress("N=%d: mid %d: fork_ms %.3f (%s) persisted %v; edit_ms %.3f (%s) persisted %v; store calls per fork or edit (count, ms): %s; a bare commit after each: %.3f ms",
		n, mid, nr.ForkMS, fmtList(forkMS), nr.ForkPersistedOK, nr.EditMS, fmtList(editMS), nr.EditPersistedOK, fmtBreakdown(nr.ForkEditBreakdown), nr.CommitMS)
	for _, p := range nr.PersistProblems {
		progress("N=%d: NOT PERSISTED AS STREAMED: %s", n, p)
	}

	// Turns at the end of the thread.
	leaf = replies[n-1]
	before, err = b.totalSize(ctx)
	if err != nil {
		return nil, err
	}
	var endMS []float64
	for i := 0; i < o.endTurns; i++ {
		r, err := b.turn(ctx, threadID, leaf)
		if err != nil {
			return nil, fmt.Errorf("end turn: %w", err)
		}
		leaf = r.run.MessageID
		endMS = append(endMS, ms(r.elapsed))
	}
	after, err = b.totalSize(ctx)
	if err != nil {
		return nil, err
	}
	nr.TurnEndMS = bench.Round(median(endMS), 3)
	nr.BytesPerTurnEnd = bench.Round(float64(after-before)/float64(o.endTurns), 1)
	progress("N=%d: turn_end_ms %.3f (%s); bytes_per_turn_end %.0f", n, nr.TurnEndMS, fmtList(endMS), nr.BytesPerTurnEnd)
	return nr, nil
}
