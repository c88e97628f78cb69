package peer

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/threadline/threadline/cmd/threadline-bench/internal/bench"
)

// peerFigures are the peer's figures from PEER_WORKLOAD.md (LangGraph JS
// 1.7.3 with @langchain/langgraph-checkpoint-postgres 1.0.5; 2 cores,
// PostgreSQL 15, one run, 2026-11-22).
var peerFigures = struct {
	TurnMS       float64
	BytesPerTurn float64
	TokensPerS   float64
	ByN          map[int]map[string]any
}{
	TurnMS: 12.2, BytesPerTurn: 40550, TokensPerS: 37900,
	ByN: map[int]map[string]any{
		10: {"get_state_ms": 7.2, "history_ms": 46.0, "fork_ms": 7.1, "edit_ms": 7.6, "turn_end_ms": 12.3,
			"bytes_per_turn_end": 21e3, "fork_persisted_ok": false, "edit_persisted_ok": false},
		100: {"get_state_ms": 25.5, "history_ms": 3376.0, "fork_ms": 27.3, "edit_ms": 27.5, "turn_end_ms": 48.8,
			"bytes_per_turn_end": 302e3, "fork_persisted_ok": false, "edit_persisted_ok": false},
		500: {"get_state_ms": 141.0, "fork_ms": 136.0, "edit_ms": 130.0, "turn_end_ms": 199.0,
			"bytes_per_turn_end": 1.5e6, "thread_stored_bytes": 374e6, "fork_persisted_ok": false, "edit_persisted_ok": false},
	},
}

// comparePeer returns the peer's figures with ratios and the targets.
func comparePeer(res *Result, ns []int) (map[string]any, map[string]bool) {
	p := peerFigures
	// Targets compare exact ratios; the JSON shows them rounded (9.96x is
	// shown as 10 and does not meet 10x).
	raw := func(a, b float64) float64 {
		if b <= 0 {
			return 0
		}
		return a / b
	}
	div := func(a, b float64) float64 { return bench.Round(raw(a, b), 1) }
	ratio := map[string]any{
		"turn_ms":           div(p.TurnMS, res.TurnMS),
		"http_turn_ms":      div(p.TurnMS, res.HTTPTurnMS),
		"bytes_per_turn":    div(p.BytesPerTurn, res.BytesPerTurn),
		"tokens_per_s":      div(res.TokensPerS, p.TokensPerS),
		"http_tokens_per_s": div(res.HTTPTokensPerS, p.TokensPerS),
	}
	targets := map[string]bool{
		"turn_ms_10x":        raw(p.TurnMS, res.TurnMS) >= 10,
		"bytes_per_turn_10x": raw(p.BytesPerTurn, res.BytesPerTurn) >= 10,
		"tokens_per_s_10x":   raw(res.TokensPerS, p.TokensPerS) >= 10,
	}
	byN := map[string]any{}
	rbyN := map[string]any{}
	for _, n := range ns {
		pf, ok := p.ByN[n]
		if !ok {
			continue
		}
		key := strconv.Itoa(n)
		byN[key] = pf
		nr := res.ByN[key]
		r, exact := map[string]float64{}, map[string]float64{}
		for k, v := range pf {
			pv, ok := v.(float64)
			if !ok {
				continue
			}
			var mine float64
			switch k {
			case "get_state_ms":
				mine = nr.GetStateMS
			case "history_ms":
				mine = nr.HistoryMS
			case "fork_ms":
				mine = nr.ForkMS
			case "edit_ms":
				mine = nr.EditMS
			case "turn_end_ms":
				mine = nr.TurnEndMS
			case "bytes_per_turn_end":
				mine = nr.BytesPerTurnEnd
			case "thread_stored_bytes":
				mine = float64(nr.ThreadStoredBytes)
			}
			r[k], exact[k] = div(pv, mine), raw(pv, mine)
		}
		rbyN[key] = r
		for _, k := range []string{"get_state_ms", "fork_ms", "edit_ms", "turn_end_ms"} {
			targets[k+"_10x_n"+key] = exact[k] >= 10
		}
		// bytes_per_turn_end has no 10x target: the issue asks for 10x on a
		// fresh thread and flat in N (below); its ratio is in ratio.by_n.
		if v, ok := exact["history_ms"]; ok && n == 100 {
			targets["history_ms_100x_n100"] = v >= 100
		}
		targets["fork_persisted_ok_n"+key] = nr.ForkPersistedOK
		targets["edit_persisted_ok_n"+key] = nr.EditPersistedOK
	}
	// Flat in N: fork and edit at the largest N within 2x of the smallest.
	if len(ns) > 1 {
		lo, hi := slices.Min(ns), slices.Max(ns)
		a, z := res.ByN[strconv.Itoa(lo)], res.ByN[strconv.Itoa(hi)]
		targets[fmt.Sprintf("fork_ms_n%d_within_2x_of_n%d", hi, lo)] = z.ForkMS <= 2*a.ForkMS
		targets[fmt.Sprintf("edit_ms_n%d_within_2x_of_n%d", hi, lo)] = z.EditMS <= 2*a.EditMS
		targets[fmt.Sprintf("bytes_per_turn_end_n%d_within_2x_of_fresh", hi)] = z.BytesPerTurnEnd <= 2*math.Max(res.BytesPerTurn, 1)
	}
	ratio["by_n"] = rbyN
	peer := map[string]any{
		"system":         "LangGraph JS 1.7.3 + @langchain/langgraph-checkpoint-postgres 1.0.5 (PostgresSaver), one-node StateGraph(MessagesAnnotation)",
		"source":         "PEER_WORKLOAD.md: 2 cores, PostgreSQL 15, one run, 2026-11-22",
		"turn_ms":        p.TurnMS,
		"bytes_per_turn": p.BytesPerTurn,
		"tokens_per_s":   p.TokensPerS,
		"by_n":           byN,
		"ratio_note":     "ratio = peer/threadline for times and bytes, threadline/peer for tokens/s: above 1 means Threadline is better by that factor",
		"ratio":          ratio,
	}
	return peer, targets
}
