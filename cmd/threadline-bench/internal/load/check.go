package load

import (
	"fmt"
	"math"
	"time"

	"github.com/threadline/threadline/model"
)

// loadCheck folds the clients into res: completion, exactly-once, delays.
func loadCheck(res *Result, clients []*loadClient, o loadOpts, interval time.Duration) {
	res.RunsStarted = len(clients)
	res.TokensExpected = int64(len(clients)) * int64(o.tokens)
	res.ExactlyOnce = true
	var lower, upper, slipFree, slips, gaps, first, span, all, before, after []float64
	var bySecond [][]float64
	var mism []string
	iv := interval.Seconds() * 1000
	var t0 time.Time // the first POST
	for _, c := range clients {
		if t0.IsZero() || (!c.sent.IsZero() && c.sent.Before(t0)) {
			t0 = c.sent
		}
	}
	// The window in which every run streams: after the last POST (and the
	// start burst it ends) and before the first run's last token.
	var allFrom, allTo time.Time
	for _, c := range clients {
		allFrom = later(allFrom, c.sent)
		if n := len(c.arrivals); n > 0 && !c.arrivals[n-1].IsZero() && (allTo.IsZero() || c.arrivals[n-1].Before(allTo)) {
			allTo = c.arrivals[n-1]
		}
	}
	allFrom = allFrom.Add(500 * time.Millisecond)
	for _, c := range clients {
		res.TokensDelivered += c.tokens
		if c.rejoined {
			res.Rejoined++
		}
		res.UnplannedRejoins += c.unplanned
		ok := len(c.errs) == 0 && c.finalSet && c.final == "succeeded"
		if c.finalSet && c.final != "succeeded" {
			c.fail("final run_status %q", c.final)
		}
		if !c.finalSet && len(c.errs) == 0 {
			c.fail("no final snapshot")
		}
		// Exactly once: every token sequence 2..tokens+1 once, the text the
		// final snapshot holds, and the text the built-in model makes.
		if c.finalSet {
			want := model.BuiltinText(c.prompt, 1, o.tokens)
			if c.tokens != int64(o.tokens) {
				c.mis("%d token events, want %d", c.tokens, o.tokens)
			}
			for s := 2; s < o.tokens+2; s++ {
				if c.arrivals[s].IsZero() {
					c.mis("token sequence %d never read", s)
					break
				}
			}
			if got := c.text.String(); got != c.finalTxt {
				c.mis("streamed text (%d bytes) differs from the final snapshot's (%d bytes)", len(got), len(c.finalTxt))
			} else if got != want {
				c.mis("streamed text (%d bytes) differs from the built-in model's (%d bytes)", len(got), len(want))
			}
			if c.lastSeq != int64(o.tokens)+2 {
				c.mis("last sequence %d, want %d", c.lastSeq, o.tokens+2)
			}
		} else if c.tokens > 0 {
			c.mis("%d tokens read but the run never ended for the client", c.tokens)
		}
		if len(c.mismatch) > 0 {
			res.ExactlyOnce = false
			res.Mismatches += len(c.mismatch)
			mism = append(mism, c.mismatch...)
		}
		if ok && len(c.errs) == 0 {
			res.RunsCompleted++
		} else {
			res.RunsFailed++
			res.Errors = append(res.Errors, c.errs...)
		}
		if !c.finalSet || c.firstAt.IsZero() {
			continue
		}
		first = append(first, c.firstAt.Sub(c.sent).Seconds()*1000)
		// o[s] is when token s was read minus its place on the model's
		// schedule (token with sequence s is tick s-1), in ms after the POST.
		ms := func(t time.Time) float64 { return t.Sub(c.sent).Seconds() * 1000 }
		n := len(c.arrivals)
		o := make([]float64, n)
		anchor := ms(c.firstAt) // the latest start the observations allow
		var last float64
		for s := 2; s < n; s++ {
			o[s] = math.NaN()
			if a := c.arrivals[s]; !a.IsZero() {
				o[s] = ms(a) - float64(s-1)*iv
				anchor = min(anchor, o[s])
				last = max(last, ms(a))
			}
		}
		// suffix[s] = min o over tokens s.. : the latest start consistent
		// with the later tokens if the model may only fall behind.
		suffix := make([]float64, n+1)
		suffix[n] = math.Inf(1)
		for s := n - 1; s >= 2; s-- {
			suffix[s] = suffix[s+1]
			if !math.IsNaN(o[s]) {
				suffix[s] = min(suffix[s], o[s])
			}
		}
		// The model's slip: how far the schedule's floor rose from the
		// first tenth of the run to the last.
		tenth := max(1, (n-2)/10)
		head, tail := math.Inf(1), math.Inf(1)
		for s := 2; s < n; s++ {
			if math.IsNaN(o[s]) {
				continue
			}
			if s < 2+tenth {
				head = min(head, o[s])
			}
			if s >= n-tenth {
				tail = min(tail, o[s])
			}
		}
		if !math.IsInf(head, 1) && !math.IsInf(tail, 1) {
			slips = append(slips, max(0, tail-head))
		}
		span = append(span, last)
		up := 0.0 // the POST
		if !c.created.IsZero() && c.created.After(c.sent) {
			up = ms(c.created)
		}
		gaps = append(gaps, anchor-up)
		for s := 2; s < n; s++ {
			if math.IsNaN(o[s]) {
				continue
			}
			if cn := int(c.conns[s]); cn > 0 && anchor+float64(s-1)*iv < ms(c.connSent[cn]) {
				continue // produced before the client asked again: not a live token
			}
			lower = append(lower, o[s]-anchor)
			if anchor+float64(s-1)*iv < ms(c.firstAt) {
				before = append(before, o[s]-anchor)
			} else {
				after = append(after, o[s]-anchor)
			}
			if sec := int(c.arrivals[s].Sub(t0) / time.Second); sec >= 0 {
				for len(bySecond) <= sec {
					bySecond = append(bySecond, nil)
				}
				bySecond[sec] = append(bySecond[sec], o[s]-anchor)
			}
			if a := c.arrivals[s]; a.After(allFrom) && a.Before(allTo) {
				all = append(all, o[s]-anchor)
			}
			slipFree = append(slipFree, o[s]-suffix[s])
			upper = append(upper, o[s]-up)
		}
	}
	res.SlipFreeMS = loadPercentiles(slipFree)
	res.AllStreamingMS = loadPercentiles(all)
	res.BeforeFirstMS = loadPercentiles(before)
	res.AfterFirstMS = loadPercentiles(after)
	res.BySecond = []loadSecond{}
	for sec, v := range bySecond {
		if len(v) > 0 {
			res.BySecond = append(res.BySecond, loadSecond{sec, loadPercentiles(v)})
		}
	}
	res.ModelSlipMS = loadPercentiles(slips)
	res.AddedDelayMS = loadPercentiles(lower)
	res.AddedDelayUpper = loadPercentiles(upper)
	res.AnchorGapMS = loadPercentiles(gaps)
	res.FirstEventMS = loadPercentiles(first)
	res.RunSpanMS = loadPercentiles(span)
	if len(res.Errors) > 20 {
		res.Errors = append(res.Errors[:20], fmt.Sprintf("… and %d more", len(res.Errors)-20))
	}
	if len(mism) > 10 {
		mism = append(mism[:10], fmt.Sprintf("… and %d more", len(mism)-10))
	}
	for _, m := range mism {
		res.Errors = append(res.Errors, "mismatch: "+m)
	}
	if res.TokensDelivered != res.TokensExpected {
		res.ExactlyOnce = false
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
