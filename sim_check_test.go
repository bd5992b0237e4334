package idem_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store"
)

// simFaultShadow is how long after an injected store fault what happens on
// its runtime is excused: a lost or slow renewal can let a lease run out,
// a slow claim answer shortens what is left of the lease, and so on.
const simFaultShadow = 6 * time.Second

// simStaleView is how long a runtime may act on what the store told it
// about another runtime's claim (a fingerprint), until its re-claim timer.
const simStaleView = 3 * time.Second

// faulted reports whether a store fault was injected on r's operations
// between from-simFaultShadow and to. Called with w.mu held.
func (w *simWorld) faulted(r *simRT, from, to time.Time) bool {
	for _, f := range w.faults {
		if f.rt == r && !f.to.Before(from.Add(-simFaultShadow)) && !f.from.After(to) {
			return true
		}
	}
	return false
}

// check verifies the invariants on what happened so far:
//
//   - an execution runs under a claim of its own, delivered to its runtime:
//     a token no other execution ran under, made with its fingerprint,
//     with a store lease of the length it asked for from when it started;
//     and never while a result of the key is stored and live;
//   - a renewing execution that runs with a live context never has its
//     store lease end (renewals are on time: the clock moves a tenth of the
//     smallest lease at a time); a claim without renewal is never renewed;
//   - no two executions of a key run with live contexts while both believe
//     they hold it (a renewing one, or one within its own hard lease);
//   - an execution is stopped for a lost lease only once its lease ended;
//   - a claim the store holds with a live lease has an execution running
//     under it (a runtime that ends a run releases its claim, or lets it
//     expire, at once);
//   - the store evicts (in the eviction mode, sim_evict_test.go) no claim
//     before its lease and TTL are over (evictlive, evictearly: checked
//     when the eviction happens); an evicted result counts from then on as
//     forgotten, an evicted claim as ended;
//   - the store never replaces a live result with another, and every
//     stored result is the one its token's execution produced; a result
//     returned under a claim nobody took over is stored;
//   - a caller's value or error names an execution of its key, with a
//     compatible fingerprint, that the store accepted (and that was live
//     during the call), or is its own execution's; every error has a cause
//     (a store error needs an injected fault, ErrClosed a closing runtime,
//     a context error an ended context, a fingerprint mismatch a claim,
//     run or result with another fingerprint, a conflict a claim or run of
//     the key and, with a settle time, that time to have passed);
//   - a call returns within its settle time, its context's end and its
//     runtime's Close (a step or two of slack), and a Close whose context
//     ended returns;
//
// all excused for a while after a store fault on the runtime concerned,
// where a fault can explain them. The teardown then checks that the world
// comes to rest: every call answered, every runtime's Stats zero, and no
// goroutine left after Close.
func (w *simWorld) check() {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, x := range w.execs {
		if !x.checked {
			x.checked = true
			w.checkStart(x)
		}
	}
	w.checkLeases(now)
	w.checkHolders(now)
	w.checkOrphans(now)
	for _, x := range w.execs {
		if !x.stopAt.IsZero() && !x.stopChecked {
			x.stopChecked = true
			w.checkStop(x)
		}
	}
	for _, x := range w.execs {
		if !x.running && !x.endChecked {
			x.endChecked = true
			w.checkRecorded(x)
		}
	}
	for _, c := range w.calls {
		if c.done && !c.checked {
			c.checked = true
			w.checkReturn(c)
		}
	}
	w.checkOverdue(now)
	w.checkClosers(now)
	for _, f := range w.forgets {
		if f.done && !f.checked {
			f.checked = true
			w.checkForget(f)
		}
	}
}

func (w *simWorld) checkStart(x *simExec) {
	c := x.call
	slack := w.cfg.step
	if !x.tokKnown {
		w.violate("noclaim/"+x.id, "exec %s of %v started, but no claim of %s was delivered to %s", x.id, c, c.key, c.rt.name)
		return
	}
	tk := w.tokens[x.tok.Fence]
	if x.reusedFrom != "" {
		w.violate("reuse/"+x.id, "exec %s of %v runs under token %d, which exec %s ran under before: the key was handed over without a claim of its own [bug 1]",
			x.id, c, x.tok.Fence, x.reusedFrom)
	}
	if tk.fp != c.fp {
		w.violate("claimfp/"+x.id, "exec %s of %v (fingerprint %q) runs under claim %d, made with fingerprint %q [bug 5]", x.id, c, c.fp, x.tok.Fence, tk.fp)
	}
	if x.endedAt0 {
		w.violate("endedtoken/"+x.id, "exec %s of %v started under token %d, which the store had already released or completed", x.id, c, x.tok.Fence)
	}
	var shift time.Duration
	if !tk.delivered.IsZero() {
		shift = tk.delivered.Sub(tk.applied)
	}
	want := x.start.Add(c.lease)
	switch {
	case x.leaseAt0.Before(want.Add(-slack - shift)):
		w.violate("leaseshort/"+x.id, "exec %s of %v started with %v of store lease left on claim %d (made by %s for a %v lease at %s), not the %v it asked for [bug 1]",
			x.id, c, x.leaseAt0.Sub(x.start), x.tok.Fence, tk.rt.name, tk.lease, w.at(tk.applied), c.lease)
	case x.leaseAt0.After(want.Add(slack)) && c.noRenew:
		w.violate("leaselong/"+x.id, "exec %s of %v (no renewal) started with %v of store lease on claim %d (made for a %v lease), more than the %v it asked for: when its hard lease ends the key stays claimed [bug 3]",
			x.id, c, x.leaseAt0.Sub(x.start), x.tok.Fence, tk.lease, c.lease)
	case x.leaseAt0.After(want.Add(slack)):
		w.violate("leaselong/"+x.id, "exec %s of %v started with %v of store lease on claim %d (made for a %v lease), more than the %v it asked for",
			x.id, c, x.leaseAt0.Sub(x.start), x.tok.Fence, tk.lease, c.lease)
	}
	for _, r := range w.records[c.key] {
		if r.seq < x.startSeq && r.liveAt(x.start) {
			w.violate("afterdone/"+x.id, "exec %s of %v started while exec %s's result for %s was stored (at %s, live until %s)",
				x.id, c, r.exec, c.key, w.at(r.created), w.at(r.expires))
		}
	}
}

func (w *simWorld) checkLeases(now time.Time) {
	for _, x := range w.execs {
		if !x.running || !x.stopAt.IsZero() || x.call.noRenew || !x.tokKnown {
			continue
		}
		tk := w.tokens[x.tok.Fence]
		var lapse time.Time
		switch {
		case tk.ended:
			lapse = tk.endedAt
		case !now.Before(tk.leaseEnd):
			lapse = tk.leaseEnd
		default:
			continue
		}
		if w.faulted(x.call.rt, x.start, now) {
			continue
		}
		if lapse.Before(x.start) {
			lapse = x.start
		}
		w.violate("lapse/"+x.id, "exec %s of %v runs with a live context, but the store lease of its claim %d ended at %s (started at %s; renewals are due every %v) [bugs 1, 2]",
			x.id, x.call, x.tok.Fence, w.at(lapse), w.at(x.start), x.call.lease/3)
	}
	for _, l := range w.lapses[w.lapsesSeen:] {
		for _, x := range l.tok.execs {
			c := x.call
			if c.noRenew || x.start.After(l.from) || (!x.running && !x.end.After(l.from)) || (!x.stopAt.IsZero() && !x.stopAt.After(l.from)) {
				continue
			}
			if w.faulted(c.rt, x.start, l.to) {
				continue
			}
			w.violate("lapse/"+x.id, "the store lease of claim %d ended at %s and was renewed only at %s, while exec %s of %v ran with a live context [bugs 1, 2]",
				x.tok.Fence, w.at(l.from), w.at(l.to), x.id, c)
		}
	}
	w.lapsesSeen = len(w.lapses)
	for _, e := range w.renewalsNR[w.renewalsSeen:] {
		w.violate("hardrenew/"+e.exec.id, "claim %d was renewed at %s while exec %s of %v, which asked for no renewal, ran under it: its hard lease became a renewed one [bug 4]",
			e.tok.tok.Fence, w.at(e.at), e.exec.id, e.exec.call)
	}
	w.renewalsSeen = len(w.renewalsNR)
}

// believes reports whether x runs as its key's holder at now: with a live
// context, and renewing or within the hard lease it asked for.
func believes(x *simExec, now time.Time) bool {
	if !x.running || !x.stopAt.IsZero() {
		return false
	}
	return !x.call.noRenew || now.Before(x.start.Add(x.call.lease))
}

func (w *simWorld) checkHolders(now time.Time) {
	var holders []*simExec
	for _, x := range w.execs {
		if believes(x, now) {
			holders = append(holders, x)
		}
	}
	for i, a := range holders {
		for _, b := range holders[i+1:] {
			if a.call.key != b.call.key || w.faulted(a.call.rt, a.start, now) || w.faulted(b.call.rt, b.start, now) {
				continue
			}
			w.violate("twoholders/"+a.id+"/"+b.id, "execs %s (of %v, token %d) and %s (of %v, token %d) run at once, each with a live context and believing it holds %s [bug 2]",
				a.id, a.call, a.tok.Fence, b.id, b.call, b.tok.Fence, a.call.key)
		}
	}
}

// checkStop checks why the runtime cancelled an execution's context.
func (w *simWorld) checkStop(x *simExec) {
	if !errors.Is(x.cause, store.ErrLeaseLost) {
		return
	}
	c := x.call
	slack := w.cfg.step
	if w.faulted(c.rt, x.start, x.stopAt) {
		return
	}
	if x.tokKnown && x.lease0.After(x.stopAt.Add(slack)) {
		w.violate("letgoearly/"+x.id, "exec %s of %v was stopped for a lost lease at %s, but the store lease of its claim %d lasted until %s [bugs 1, 3]",
			x.id, c, w.at(x.stopAt), x.tok.Fence, w.at(x.lease0))
		return
	}
	if c.noRenew && x.stopAt.Before(x.start.Add(c.lease).Add(-slack)) {
		w.violate("letgoearly/"+x.id, "exec %s of %v (no renewal) was let go at %s, %v after it started, before the %v lease it asked for ended [bug 1]",
			x.id, c, w.at(x.stopAt), x.stopAt.Sub(x.start), c.lease)
	}
}

// checkRecorded checks that an execution that returned a result (a value
// or a permanent error) under a claim nobody took over had that result
// stored: no finished side effect goes unrecorded, and a claim is "current
// and untaken" until another claim of the key replaces it, however long ago
// its lease ended. A store fault on its runtime, or a Close of it whose
// context ended, excuses it.
func (w *simWorld) checkRecorded(x *simExec) {
	c := x.call
	if (x.how != simActNames[actValue] && x.how != simActNames[actPermanent]) || !x.tokKnown {
		return
	}
	if x.leaseAtEnd.IsZero() || w.faulted(c.rt, x.start, x.end) || (c.rt.closing && w.anyCloseCancelled(c.rt)) {
		return
	}
	if w.tokens[x.tok.Fence].evicted {
		return // abandoned and evicted (if it was live, evictlive says so)
	}
	for _, tk := range w.tokens {
		if tk.key == c.key && tk.tok.Fence > x.tok.Fence {
			return // taken over (or released and claimed again)
		}
	}
	if w.recByExec[x.id] == nil {
		w.violate("unrecorded/"+x.id, "exec %s of %v returned a %s at %s under claim %d (store lease until %s), which nobody took over, but the store never got it",
			x.id, c, x.how, w.at(x.end), x.tok.Fence, w.at(x.leaseAtEnd))
	}
}

// checkReturn checks a call's answer.
func (w *simWorld) checkReturn(c *simCall) {
	err := c.err
	var pe *idem.PanicError
	var se *simErr
	switch {
	case err == nil:
		if c.out == idem.NoOutcome {
			w.violate(fmt.Sprintf("nooutcome/%d", c.id), "%v returned a value with no outcome", c)
		}
		if c.val.Key != c.key {
			w.violate(fmt.Sprintf("wrongkey/%d", c.id), "%v got a value of key %q (exec %s)", c, c.val.Key, c.val.Exec)
		}
		w.checkResult(c, c.val.Exec, "value")
	case errors.As(err, &pe):
		id := ""
		if m := simExecRe.FindStringSubmatch(fmt.Sprint(pe.Value)); m != nil {
			id = m[1]
		}
		x := w.execByID[id]
		switch {
		case x == nil:
			w.violate(fmt.Sprintf("phantompanic/%d", c.id), "%v got a panic of no execution: %v", c, err)
		case x.call.key != c.key || x.call.rt != c.rt:
			w.violate(fmt.Sprintf("foreignpanic/%d", c.id), "%v got the panic of exec %s (of %v)", c, id, x.call)
		case c.fp != "" && x.call.fp != "" && c.fp != x.call.fp:
			w.violate(fmt.Sprintf("wrongfp/%d", c.id), "%v got the panic of exec %s, whose fingerprint is %q", c, id, x.call.fp)
		}
	case idem.IsPermanent(err):
		id := ""
		if m := simExecRe.FindStringSubmatch(err.Error()); m != nil {
			id = m[1]
		}
		w.checkResult(c, id, "permanent error")
	case errors.As(err, &se):
		if x := w.execByID[se.exec]; x == nil || x.call != c {
			w.violate(fmt.Sprintf("foreignerr/%d", c.id), "%v got exec %s's error, but did not run it: %v", c, se.exec, err)
		}
	case errors.Is(err, idem.ErrConflict):
		w.checkConflict(c)
	case errors.Is(err, idem.ErrFingerprintMismatch):
		w.checkMismatch(c)
	case errors.Is(err, idem.ErrLeaseLost):
		if len(c.execs) == 0 {
			w.violate(fmt.Sprintf("lostnotrun/%d", c.id), "%v got ErrLeaseLost without running: %v", c, err)
		}
	case errors.Is(err, idem.ErrStoreUnavailable):
		if !w.faulted(c.rt, c.start, c.end) {
			w.violate(fmt.Sprintf("storeerr/%d", c.id), "%v got a store error, but no fault was injected on %s: %v", c, c.rt.name, err)
		}
	case errors.Is(err, idem.ErrClosed):
		if !c.rt.closing || c.rt.closeAt.After(c.end) {
			w.violate(fmt.Sprintf("closed/%d", c.id), "%v got ErrClosed from a runtime that was not closing: %v", c, err)
		}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		if c.cancelAt.IsZero() || c.cancelAt.After(c.end) {
			w.violate(fmt.Sprintf("ctxerr/%d", c.id), "%v got a context error, but its context had not ended: %v", c, err)
		}
	default:
		w.violate(fmt.Sprintf("unexpected/%d", c.id), "%v got an unexpected error: %v", c, err)
	}
}

// checkResult checks a result (a value or a permanent error) a call got:
// it names exec id of the call's key, with a compatible fingerprint, which
// the store accepted, and which was live during the call.
func (w *simWorld) checkResult(c *simCall, id, what string) {
	x := w.execByID[id]
	if x == nil {
		w.violate(fmt.Sprintf("phantom/%d", c.id), "%v got a %s naming exec %q, which never ran", c, what, id)
		return
	}
	if x.call.key != c.key {
		w.violate(fmt.Sprintf("wrongkey/%d", c.id), "%v got the %s of exec %s, of key %s", c, what, id, x.call.key)
	}
	if c.fp != "" && x.call.fp != "" && c.fp != x.call.fp {
		w.violate(fmt.Sprintf("wrongfp/%d", c.id), "%v got the %s of exec %s, whose fingerprint is %q", c, what, id, x.call.fp)
	}
	rec := w.recByExec[id]
	if rec == nil {
		w.violate(fmt.Sprintf("unstored/%d", c.id), "%v got the %s of exec %s (%v), which the store never accepted", c, what, id, c.out)
		return
	}
	if c.out == idem.Executed {
		if x.call != c {
			w.violate(fmt.Sprintf("executedother/%d", c.id), "%v says it executed, but got exec %s's %s (of %v)", c, id, what, x.call)
		}
		return
	}
	if rec.created.After(c.end) || !rec.expires.After(c.start) {
		w.violate(fmt.Sprintf("stale/%d", c.id), "%v (%s to %s) got exec %s's %s, stored at %s and live until %s",
			c, w.at(c.start), w.at(c.end), id, what, w.at(rec.created), w.at(rec.expires))
	}
	if !rec.forgotten.IsZero() {
		for _, seq := range c.rt.forgot[c.key] {
			if seq < c.startSeq && !rec.forgotten.After(w.forgetAt(seq)) {
				w.violate(fmt.Sprintf("forgotten/%d", c.id), "%v got exec %s's %s, which %s forgot (the store deleted it at %s) before the call began",
					c, id, what, c.rt.name, w.at(rec.forgotten))
			}
		}
	}
}

// checkMismatch checks that a fingerprint mismatch had a cause: a claim or
// a result of the key with another fingerprint, during the call (or shortly
// before: a runtime acts on what the store last told it about a key held
// elsewhere).
func (w *simWorld) checkMismatch(c *simCall) {
	if c.fp == "" {
		w.violate(fmt.Sprintf("mismatchnofp/%d", c.id), "%v, without a fingerprint, got ErrFingerprintMismatch", c)
		return
	}
	from := c.start.Add(-simStaleView)
	other := func(fp string) bool { return fp != "" && fp != c.fp }
	for _, tk := range w.tokens {
		if tk.key == c.key && other(tk.fp) && !tk.applied.After(c.end) && (!tk.ended || !tk.endedAt.Before(from)) {
			return
		}
	}
	for _, r := range w.records[c.key] {
		if other(r.fp) && !r.created.After(c.end) && r.expires.After(from) {
			return
		}
	}
	for _, x := range w.execs {
		if x.call.key == c.key && other(x.call.fp) && !x.start.After(c.end) && (x.running || !x.end.Before(from)) {
			return
		}
	}
	w.violate(fmt.Sprintf("mismatch/%d", c.id), "%v got ErrFingerprintMismatch, but no claim or result of %s with another fingerprint existed during the call", c, c.key)
}

// checkConflict checks that a conflict came no earlier than the call's
// settle time, and while the key was held: a claim of it live in the store
// or an execution of it running during the call (or shortly before, for a
// runtime acting on what the store last told it).
func (w *simWorld) checkConflict(c *simCall) {
	slack := w.cfg.step
	if c.settle > 0 && c.end.Before(c.start.Add(c.settle).Add(-slack)) {
		w.violate(fmt.Sprintf("earlyconflict/%d", c.id), "%v got ErrConflict %v after it began, before its settle time ended", c, c.end.Sub(c.start))
	}
	from := c.start.Add(-simStaleView)
	for _, tk := range w.tokens {
		if tk.key == c.key && !tk.applied.After(c.end) && !tk.leaseEnd.Before(from) && (!tk.ended || !tk.endedAt.Before(from)) {
			return
		}
	}
	for _, x := range w.execs {
		if x.call.key == c.key && !x.start.After(c.end) && (x.running || !x.end.Before(from)) {
			return
		}
	}
	w.violate(fmt.Sprintf("phantomconflict/%d", c.id), "%v got ErrConflict, but no claim of %s was live and no execution of it ran during the call", c, c.key)
}

// checkOverdue checks that calls in flight are within their bounds: the
// end of their context, their settle time (for a caller that did not run),
// their runtime's Close, and a lease after their function returned.
func (w *simWorld) checkOverdue(now time.Time) {
	slack := 2 * w.cfg.step
	for _, c := range w.calls {
		if c.done {
			continue
		}
		var bound time.Time
		why := ""
		tighten := func(t time.Time, reason string) {
			if bound.IsZero() || t.Before(bound) {
				bound, why = t, reason
			}
		}
		if !c.cancelAt.IsZero() {
			tighten(c.cancelAt, "its context ended")
		}
		faulted := w.faulted(c.rt, c.start, now)
		if len(c.execs) == 0 {
			if c.rt.closing {
				tighten(c.rt.closeAt, "its runtime began to close")
			}
			if !faulted {
				tighten(c.start.Add(c.settle), "its settle time ended")
			}
		} else if x := c.execs[len(c.execs)-1]; !x.running && !faulted {
			tighten(x.end.Add(c.lease+time.Second), "its function returned a lease and the longest retry ago")
		}
		if !bound.IsZero() && now.Sub(bound) > slack {
			w.violate(fmt.Sprintf("overdue/%d", c.id), "%v has not returned %v after %s (at %s)", c, now.Sub(bound), why, w.at(bound))
		}
	}
}

func (w *simWorld) checkClosers(now time.Time) {
	slack := 2 * w.cfg.step
	for _, cl := range w.closers {
		if !cl.done && !cl.cancelAt.IsZero() && now.Sub(cl.cancelAt) > slack {
			what := "Close"
			if cl.second {
				what = "a second Close"
			}
			w.violate("closeoverdue/"+cl.rt.name, "%s of %s has not returned %v after its context ended [bug 7]", what, cl.rt.name, now.Sub(cl.cancelAt))
		}
		if cl.done && !cl.checked {
			cl.checked = true
			if cl.err != nil && cl.cancelAt.IsZero() && !w.anyCloseCancelled(cl.rt) {
				w.violate("closeerr/"+cl.rt.name, "Close of %s returned %v, though no Close's context ended", cl.rt.name, cl.err)
			}
		}
	}
}

func (w *simWorld) anyCloseCancelled(r *simRT) bool {
	for _, cl := range w.closers {
		if cl.rt == r && !cl.cancelAt.IsZero() {
			return true
		}
	}
	return false
}

func (w *simWorld) checkForget(f *simForget) {
	var ce *idem.ConflictError
	switch err := f.err; {
	case err == nil, errors.As(err, &ce):
	case errors.Is(err, idem.ErrClosed):
		if !f.rt.closing {
			w.violate("forgetclosed/"+f.key, "Forget of %s on %s, which was not closing, returned %v", f.key, f.rt.name, err)
		}
	case errors.Is(err, idem.ErrStoreUnavailable):
		if !w.faulted(f.rt, f.start, f.end) {
			w.violate("forgetstore/"+f.key, "Forget of %s on %s returned a store error with no fault injected: %v", f.key, f.rt.name, err)
		}
	default:
		w.violate("forgeterr/"+f.key, "Forget of %s on %s returned an unexpected error: %v", f.key, f.rt.name, err)
	}
}

// forgetAt returns when the Forget that returned at seq returned.
func (w *simWorld) forgetAt(seq int64) time.Time {
	for _, f := range w.forgets {
		if f.endSeq == seq {
			return f.end
		}
	}
	return time.Time{}
}

// checkOrphans looks for claims the store holds with a live lease while no
// execution runs under them: callers then get ErrConflict (or wait) for a
// key nobody works on. Claims of a closing runtime are left out (a forced
// Close leaves its claims to expire), as are claims of a runtime with a
// recent store fault (a lost Claimed answer, a refused Release).
func (w *simWorld) checkOrphans(now time.Time) {
	slack := w.cfg.step
	for _, tk := range w.tokens {
		if tk.ended || !now.Add(slack).Before(tk.leaseEnd) || tk.rt.closing || len(tk.execs) == 0 {
			continue
		}
		if w.faulted(tk.rt, tk.applied, now) {
			continue
		}
		last := tk.execs[len(tk.execs)-1]
		if last.running {
			continue
		}
		w.violate(fmt.Sprintf("orphan/%d", tk.tok.Fence), "claim %d of %s (by %s, for a %v lease) is live in the store until %s, but its last execution %s ended at %s (%s): the key stays claimed with nobody running it [bug 3]",
			tk.tok.Fence, tk.key, tk.rt.name, tk.lease, w.at(tk.leaseEnd), last.id, w.at(last.end), last.how)
	}
}
