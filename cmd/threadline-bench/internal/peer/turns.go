package peer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/api/client"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// userText returns the next user message: exactly 64 bytes of ASCII.
func (b *peerBench) userText(kind string) string {
	b.msgSeq++
	s := fmt.Sprintf("%s %06d:", kind, b.msgSeq)
	r := rand.New(rand.NewPCG(uint64(b.msgSeq), 7))
	var sb strings.Builder
	sb.WriteString(s)
	for sb.Len() < peerUserBytes {
		if r.IntN(6) == 0 {
			sb.WriteByte(' ')
		} else {
			sb.WriteByte(byte('a' + r.IntN(26)))
		}
	}
	return sb.String()
}

// runResult is what one in-process run streamed.
type runResult struct {
	run     *thread.Run
	elapsed time.Duration
	text    string // the token texts, concatenated
	tokens  int
	first   *thread.Snapshot
	final   *thread.Snapshot
	badIDs  int // token events naming another message
}

// runInProc starts a run and follows it to its final snapshot.
func (b *peerBench) runInProc(ctx context.Context, threadID uuid.UUID, req thread.RunRequest) (runResult, error) {
	var res runResult
	var sb strings.Builder
	var errText string
	start := time.Now()
	r, _, err := b.svc.StartRun(ctx, peerCaller, threadID, req)
	if err != nil {
		return res, fmt.Errorf("start run: %w", err)
	}
	err = b.svc.FollowRun(ctx, peerCaller, r, 0, func(ev thread.Event, _ bool) error {
		switch ev.Type {
		case thread.KindToken:
			res.tokens++
			sb.WriteString(ev.Text)
			if ev.MessageID != r.MessageID {
				res.badIDs++
			}
		case thread.KindSnapshot:
			if ev.Final() {
				res.final = ev.Snapshot
			} else if res.first == nil {
				res.first = ev.Snapshot
			}
		case thread.KindError:
			errText = string(ev.Code) + ": " + ev.Text
		}
		return nil
	})
	res.elapsed = time.Since(start)
	res.run, res.text = r, sb.String()
	if err != nil {
		return res, fmt.Errorf("follow run %s: %w", r.ID, err)
	}
	if res.final == nil {
		return res, fmt.Errorf("run %s: the stream ended without a final snapshot", r.ID)
	}
	if res.final.RunStatus != thread.RunSucceeded {
		return res, fmt.Errorf("run %s ended %s %s", r.ID, res.final.RunStatus, errText)
	}
	return res, nil
}

// turn appends a user message under parent and runs the model.
func (b *peerBench) turn(ctx context.Context, threadID, parent uuid.UUID) (runResult, error) {
	return b.runInProc(ctx, threadID, thread.RunRequest{
		Message:  &thread.UserMessage{Content: []checkpoint.Part{{Type: "text", Text: b.userText("turn")}}},
		ParentID: parent,
	})
}

type httpRunResult struct {
	elapsed  time.Duration
	tokens   int
	headID   uuid.UUID
	finalOK  bool
	lastSeq  int64
	gapFound bool
}

// runHTTP posts a run and reads its NDJSON stream to the end.
func (b *peerBench) runHTTP(ctx context.Context, threadID uuid.UUID, body map[string]any) (httpRunResult, error) {
	var res httpRunResult
	data, err := json.Marshal(body)
	if err != nil {
		return res, err
	}
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.warm+"/api/v1/threads/"+threadID.String()+"/runs/stream", bytes.NewReader(data))
	if err != nil {
		return res, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		return res, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return res, fmt.Errorf("POST runs/stream: %s: %s", resp.Status, msg)
	}
	// The Go client's events, without decoding a snapshot's tree (the
	// peer's client reads no more of it either), so the figure stays the
	// service's.
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadBytes('\n')
		if err == io.EOF && len(line) == 0 {
			break
		} else if err != nil && err != io.EOF {
			return res, fmt.Errorf("read stream: %w", err)
		}
		var ev client.Event
		if err := client.DecodeEventHead(line, &ev); err != nil {
			return res, fmt.Errorf("read stream: %w", err)
		}
		if ev.Sequence != res.lastSeq+1 {
			res.gapFound = true
		}
		res.lastSeq = ev.Sequence
		switch ev.Type {
		case thread.KindToken:
			res.tokens++
		case thread.KindSnapshot:
			if res.headID == uuid.Nil && ev.Repository != nil && ev.Repository.HeadID != nil {
				res.headID, _ = uuid.Parse(*ev.Repository.HeadID)
			}
			if ev.RunStatus != string(thread.RunRunning) {
				if ev.RunStatus != string(thread.RunSucceeded) {
					return res, fmt.Errorf("run ended %s", ev.RunStatus)
				}
				res.finalOK = true
			}
		case thread.KindError:
			return res, fmt.Errorf("run failed: %s: %s", ev.Code, ev.Error)
		}
	}
	res.elapsed = time.Since(start)
	if !res.finalOK {
		return res, errors.New("the stream ended without a final snapshot")
	}
	if res.gapFound {
		return res, errors.New("the stream's sequences have a gap or repeat")
	}
	return res, nil
}

func (b *peerBench) httpTurn(ctx context.Context, threadID, parent uuid.UUID) (httpRunResult, error) {
	body := map[string]any{"message": map[string]any{"content": b.userText("http")}, "parent_message_id": nil}
	if parent != uuid.Nil {
		body["parent_message_id"] = parent.String()
	}
	return b.runHTTP(ctx, threadID, body)
}

// getJSON fetches a URL and decodes its JSON body into v.
func (b *peerBench) getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, msg)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}
