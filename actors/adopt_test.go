package actors

// Table tests of adopt: an owner that claimed its key on its own goroutine
// (direct.go) and runs already, told to the shard in every local situation
// the key can be in when its request comes.

import (
	"errors"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

// direct returns a request whose caller claimed the key itself with the
// given fence, at the world's time less ago.
func (w *world) direct(fence uint64, ago time.Duration, mods ...func(*Request)) *Request {
	r := req(mods...)
	r.pre, r.preToken, r.deadline = true, store.Token{Fence: fence, Owner: "direct"}, w.now.Add(-ago)
	r.preGranted, r.preAttempt = true, 1
	return r
}

// takeover is direct for a claim that took the key over: not granted yet.
func (w *world) takeover(fence uint64, mods ...func(*Request)) *Request {
	r := w.direct(fence, 0, mods...)
	r.preGranted, r.preTakeover, r.preAttempt = false, true, 2
	return r
}

// lastTimer returns the phase timer the last step armed.
func (w *world) lastTimer() timerEffect {
	w.t.Helper()
	for i := len(w.fx.timers) - 1; i >= 0; i-- {
		if !w.fx.timers[i].settle {
			return w.fx.timers[i]
		}
	}
	w.t.Fatal("no phase timer armed")
	return timerEffect{}
}

// storedFinish is the Finish of an owner that stored its result itself.
func storedFinish(r *Request, exp time.Time) *Finish {
	c := &Cached{Record: store.Record{Value: []byte(`"v"`), ExpiresAt: exp}, Value: "v"}
	return &Finish{Req: r, Kind: Success, Value: "v", Stored: true, Own: *c, Result: c}
}

func TestAdopt(t *testing.T) {
	t.Run("alone", func(t *testing.T) {
		w := newWorld(t)
		r := w.arrive(w.direct(1, time.Second))
		w.wantPhase(phRunning)
		if len(w.replies[r]) != 0 {
			t.Fatalf("an adopted owner was answered: %+v (its Grant came from the store)", w.replies[r])
		}
		if tm := w.lastTimer(); tm.kind != timerRenew || !tm.at.Equal(r.preAt().Add(3*time.Second)) {
			t.Fatalf("timer %+v, want the renewal a third of the lease after the claim", tm)
		}
		w.wantOps()
		w.step(event{kind: evFinish, fin: storedFinish(r, w.now.Add(time.Hour))})
		if len(w.cached) != 1 || w.cached[0].Value != "v" {
			t.Fatalf("cached %+v, want the owner's result", w.cached)
		}
		w.wantDone()
	})
	t.Run("hard lease", func(t *testing.T) {
		w := newWorld(t)
		r := w.arrive(w.direct(1, time.Second, noRenew))
		if tm := w.lastTimer(); tm.kind != timerLeaseEnd || !tm.at.Equal(r.preAt().Add(9*time.Second)) {
			t.Fatalf("timer %+v, want the lease's end, counted from the claim", tm)
		}
	})
	t.Run("parked behind it as behind another instance", func(t *testing.T) {
		w := newWorld(t)
		waiter := w.arrive(req(fp("a")))
		other := w.arrive(req(fp("b")))
		w.answer(store.OpClaim, store.ClaimResult{Status: store.InProgress, Token: store.Token{Fence: 4, Owner: "direct"},
			Fingerprint: []byte("a"), LeaseLeft: 9 * time.Second}, nil)
		w.wantPhase(phRemote)
		w.wantReply(other, FailMismatch)
		r := w.arrive(w.direct(4, time.Millisecond, fp("a")))
		w.wantPhase(phRunning)
		w.wantSilent(waiter)
		if w.k.owner != r || w.k.token.Fence != 4 {
			t.Fatalf("owner %p (token %+v), want the adopted one", w.k.owner, w.k.token)
		}
		w.step(event{kind: evFinish, fin: storedFinish(r, w.now.Add(time.Hour))})
		rep := w.wantReply(waiter, Settled)
		if !rep.Joined || rep.Result.Value != "v" {
			t.Fatalf("waiter's answer %+v, want the owner's value, joined", rep)
		}
		w.wantDone()
	})
	t.Run("takes the key from an owner whose lease ended", func(t *testing.T) {
		w := newWorld(t)
		old := w.arrive(req(noRenew))
		w.granted() // fence 1
		waiter := w.arrive(req())
		r := w.arrive(w.direct(2, 0))
		if !errors.Is(w.stops[old], store.ErrLeaseLost) || !old.expired {
			t.Fatalf("the old owner's run was not stopped (%v)", w.stops[old])
		}
		if w.k.owner != r {
			t.Fatal("the newer claim was not adopted")
		}
		w.wantSilent(waiter)
		w.step(event{kind: evFinish, fin: &Finish{Req: old, Kind: Success, Value: "old"}})
		w.wantReply(old, FailLeaseLost)
		w.wantOps() // nothing stored for the old owner
		w.step(event{kind: evFinish, fin: storedFinish(r, w.now.Add(time.Hour))})
		w.wantReply(waiter, Settled)
		w.wantDone()
	})
	t.Run("a takeover is granted after the old owner is stopped", func(t *testing.T) {
		w := newWorld(t)
		old := w.arrive(req(noRenew))
		w.granted() // fence 1
		r := w.arrive(w.takeover(2))
		if !errors.Is(w.stops[old], store.ErrLeaseLost) {
			t.Fatalf("the old owner's run was not stopped (%v)", w.stops[old])
		}
		rep := w.wantReply(r, Grant)
		if !rep.Takeover || rep.Attempt != 2 || rep.Token.Fence != 2 || r.where != owning {
			t.Fatalf("grant %+v (where %d), want the takeover's facts", rep, r.where)
		}
	})
	t.Run("a takeover older than the holder's claim is refused", func(t *testing.T) {
		w := newWorld(t)
		owner := w.arrive(req())
		w.fence = 4
		w.granted() // fence 5
		r := w.arrive(w.takeover(3))
		w.wantReply(r, FailLeaseLost)
		if w.k.owner != owner || len(w.stops) != 0 {
			t.Fatal("the holder was disturbed")
		}
	})
	t.Run("an older claim than the holder's is stopped", func(t *testing.T) {
		w := newWorld(t)
		owner := w.arrive(req())
		w.fence = 2
		w.granted() // fence 3
		r := w.arrive(w.direct(2, time.Minute))
		if !errors.Is(w.stops[r], store.ErrLeaseLost) || !r.expired || w.k.owner != owner {
			t.Fatalf("stale adopted owner: stop %v, owner kept %v", w.stops[r], w.k.owner == owner)
		}
		w.step(event{kind: evFinish, fin: &Finish{Req: r, Kind: Transient, Err: errors.New("stopped")}})
		w.wantReply(r, FailLeaseLost)
		w.wantPhase(phRunning)
	})
	t.Run("a result waiting for its retry gives way", func(t *testing.T) {
		w := newWorld(t)
		owner := w.arrive(req())
		w.granted() // fence 1
		waiter := w.arrive(req())
		f := storedFinish(owner, w.now.Add(time.Hour))
		f.StoreErr = errors.New("down")
		w.step(event{kind: evFinish, fin: f})
		w.wantPhase(phFinishing)
		r := w.arrive(w.direct(2, 0))
		w.wantPhase(phRunning)
		if w.k.retryArmed || w.k.result.Value != nil {
			t.Fatal("the old result is still kept for a retry")
		}
		w.wantSilent(waiter)
		// A retry timer of the old result that fires now finds a running owner.
		w.step(event{kind: evTimer, timer: timerRetry})
		w.wantOps()
		w.step(event{kind: evFinish, fin: storedFinish(r, w.now.Add(time.Hour))})
		w.wantReply(waiter, Settled)
	})
	t.Run("failed run released as any owner's", func(t *testing.T) {
		w := newWorld(t)
		r := w.arrive(w.direct(7, 0))
		waiter := w.arrive(req())
		w.step(event{kind: evFinish, fin: &Finish{Req: r, Kind: Transient, Err: errors.New("boom")}})
		w.wantOps(store.OpRelease)
		if tok := w.out[0].token; tok.Fence != 7 {
			t.Fatalf("release of token %+v, want the adopted claim's", tok)
		}
		w.answer(store.OpRelease, store.ClaimResult{}, nil)
		_ = w.take(store.OpClaim) // the waiter claims the key afresh
		w.wantReply(r, FailOwner)
		w.wantSilent(waiter)
	})
	t.Run("closing", func(t *testing.T) {
		w := newWorld(t)
		w.closing = true
		r := w.arrive(w.direct(1, 0))
		if !errors.Is(w.stops[r], store.ErrClosed) {
			t.Fatalf("stop %v, want the run stopped as Close stops owners", w.stops[r])
		}
	})
}

// A claim that finds the key completed answers with the LRU's copy of that
// very result when the shell found one (the owner's value itself, cached by
// a direct owner), and with the store's record otherwise.
func TestFoundResultPrefersTheOwnersCopy(t *testing.T) {
	for _, same := range []bool{true, false} {
		w := newWorld(t)
		r := w.arrive(req())
		rec := w.stored().Record
		own := &Cached{Record: rec, Value: "the owner's"}
		if !same {
			own.Record.Token.Fence++
		}
		oe := w.take(store.OpClaim)
		o := &store.Op{Kind: store.OpClaim, Key: "k", Claim: store.ClaimRequest{Lease: oe.lease, TTL: oe.ttl},
			Result: store.ClaimResult{Status: store.Completed, Record: rec}}
		w.step(event{kind: evClaimed, op: o, sent: w.sent, own: own})
		rep := w.wantReply(r, Settled)
		if got := rep.Result.Value != nil; got != same {
			t.Fatalf("same result %v: answered with value %v", same, rep.Result.Value)
		}
	}
}
