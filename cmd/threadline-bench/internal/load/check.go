package load

import (
	"fmt"
	"math"
	"time"

	"github.com/threadline/threadline/model/builtin"
)

// loadCheck folds the clients into res: completion, exactly-once, delays.
func loadCheck(res *Result, clients []*loadClient, o loadOpts, interval time.Duration) {
	res.RunsStarted = len(clients)
	res.TokensExpected = int64(len(clients)) * int64(o.tokens)
	res.ExactlyOnce = true
	w := loadWindowOf(clients, interval)
	var d delaySamples
	var mism []string
	for _, c := range clients {
		res.TokensDelivered += c.tokens
		if c.rejoined {
			res.Rejoined++
		}
		res.UnplannedRejoins += c.unplanned
		ok := len(c.errs) == 0 && c.finalSet && c.final == "succeeded"
		c.checkExactlyOnce(o.tokens)
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
		if c.finalSet && !c.firstAt.IsZero() {
			d.add(c, w)
		}
	}
	d.into(res)
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

// checkExactlyOnce notes the client's failures (no final snapshot, or not
// succeeded) and mismatches: every token sequence 2..tokens+1 once, the
// text the final snapshot holds, and the text the built-in model makes.
func (c *loadClient) checkExactlyOnce(tokens int) {
	if c.finalSet && c.final != "succeeded" {
		c.fail("final run_status %q", c.final)
	}
	if !c.finalSet && len(c.errs) == 0 {
		c.fail("no final snapshot")
	}
	if !c.finalSet {
		if c.tokens > 0 {
			c.mis("%d tokens read but the run never ended for the client", c.tokens)
		}
		return
	}
	want := builtin.BuiltinText(c.prompt, 1, tokens)
	if c.tokens != int64(tokens) {
		c.mis("%d token events, want %d", c.tokens, tokens)
	}
	for s := 2; s < tokens+2; s++ {
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
	if c.lastSeq != int64(tokens)+2 {
		c.mis("last sequence %d, want %d", c.lastSeq, tokens+2)
	}
}

// loadWindow is what every client's delays are placed against.
type loadWindow struct {
	t0             time.Time // the first POST
	allFrom, allTo time.Time // while every run streams
	iv             float64   // ms between two tokens of the model
}

func loadWindowOf(clients []*loadClient, interval time.Duration) loadWindow {
	w := loadWindow{iv: interval.Seconds() * 1000}
	for _, c := range clients {
		if w.t0.IsZero() || (!c.sent.IsZero() && c.sent.Before(w.t0)) {
			w.t0 = c.sent
		}
	}
	// The window in which every run streams: after the last POST (and the
	// start burst it ends) and before the first run's last token.
	for _, c := range clients {
		w.allFrom = later(w.allFrom, c.sent)
		if n := len(c.arrivals); n > 0 && !c.arrivals[n-1].IsZero() && (w.allTo.IsZero() || c.arrivals[n-1].Before(w.allTo)) {
			w.allTo = c.arrivals[n-1]
		}
	}
	w.allFrom = w.allFrom.Add(500 * time.Millisecond)
	return w
}

// delaySamples gathers, in ms, every client's figures for the result's
// distributions (see loadDelayMethod).
type delaySamples struct {
	lower, upper, slipFree, slips, gaps, first, span, all, before, after []float64
	bySecond                                                             [][]float64
}

// add adds the samples of one client that read its run to the end.
func (d *delaySamples) add(c *loadClient, w loadWindow) {
	d.first = append(d.first, c.firstAt.Sub(c.sent).Seconds()*1000)
	ms := func(t time.Time) float64 { return t.Sub(c.sent).Seconds() * 1000 }
	o, anchor, last := c.schedule(w.iv)
	suffix := suffixMin(o)
	if slip, ok := modelSlip(o); ok {
		d.slips = append(d.slips, slip)
	}
	d.span = append(d.span, last)
	up := 0.0 // the POST
	if !c.created.IsZero() && c.created.After(c.sent) {
		up = ms(c.created)
	}
	d.gaps = append(d.gaps, anchor-up)
	for s := 2; s < len(o); s++ {
		if math.IsNaN(o[s]) {
			continue
		}
		if cn := int(c.conns[s]); cn > 0 && anchor+float64(s-1)*w.iv < ms(c.connSent[cn]) {
			continue // produced before the client asked again: not a live token
		}
		delay := o[s] - anchor
		d.lower = append(d.lower, delay)
		if anchor+float64(s-1)*w.iv < ms(c.firstAt) {
			d.before = append(d.before, delay)
		} else {
			d.after = append(d.after, delay)
		}
		if sec := int(c.arrivals[s].Sub(w.t0) / time.Second); sec >= 0 {
			for len(d.bySecond) <= sec {
				d.bySecond = append(d.bySecond, nil)
			}
			d.bySecond[sec] = append(d.bySecond[sec], delay)
		}
		if a := c.arrivals[s]; a.After(w.allFrom) && a.Before(w.allTo) {
			d.all = append(d.all, delay)
		}
		d.slipFree = append(d.slipFree, o[s]-suffix[s])
		d.upper = append(d.upper, o[s]-up)
	}
}

// schedule returns o, where o[s] is when token s was read minus its place
// on the model's schedule (token with sequence s is tick s-1), in ms after
// the POST (NaN for a token never read); anchor, the latest start the
// observations allow; and last, when the last token was read.
func (c *loadClient) schedule(iv float64) (o []float64, anchor, last float64) {
	ms := func(t time.Time) float64 { return t.Sub(c.sent).Seconds() * 1000 }
	n := len(c.arrivals)
	o = make([]float64, n)
	anchor = ms(c.firstAt)
	for s := 2; s < n; s++ {
		o[s] = math.NaN()
		if a := c.arrivals[s]; !a.IsZero() {
			o[s] = ms(a) - float64(s-1)*iv
			anchor = min(anchor, o[s])
			last = max(last, ms(a))
		}
	}
	return o, anchor, last
}

// suffixMin returns suffix, where suffix[s] = min o over tokens s.. : the
// latest start consistent with the later tokens if the model may only fall
// behind.
func suffixMin(o []float64) []float64 {
	n := len(o)
	suffix := make([]float64, n+1)
	suffix[n] = math.Inf(1)
	for s := n - 1; s >= 2; s-- {
		suffix[s] = suffix[s+1]
		if !math.IsNaN(o[s]) {
			suffix[s] = min(suffix[s], o[s])
		}
	}
	return suffix
}

// modelSlip is how far the schedule's floor rose from the first tenth of
// the run to the last; ok is false when either tenth has no token.
func modelSlip(o []float64) (slip float64, ok bool) {
	n := len(o)
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
	if math.IsInf(head, 1) || math.IsInf(tail, 1) {
		return 0, false
	}
	return max(0, tail-head), true
}

// into sets res's distributions.
func (d *delaySamples) into(res *Result) {
	res.SlipFreeMS = loadPercentiles(d.slipFree)
	res.AllStreamingMS = loadPercentiles(d.all)
	res.BeforeFirstMS = loadPercentiles(d.before)
	res.AfterFirstMS = loadPercentiles(d.after)
	res.BySecond = []loadSecond{}
	for sec, v := range d.bySecond {
		if len(v) > 0 {
			res.BySecond = append(res.BySecond, loadSecond{sec, loadPercentiles(v)})
		}
	}
	res.ModelSlipMS = loadPercentiles(d.slips)
	res.AddedDelayMS = loadPercentiles(d.lower)
	res.AddedDelayUpper = loadPercentiles(d.upper)
	res.AnchorGapMS = loadPercentiles(d.gaps)
	res.FirstEventMS = loadPercentiles(d.first)
	res.RunSpanMS = loadPercentiles(d.span)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
