package actors

// Table tests of the transition function (step.go): every answer the store
// contract allows to each operation, against the local situations a key can
// be in when it comes (callers waiting, a caller that cannot wait or has
// another fingerprint, a candidate that left, the runtime closing), and the
// local events (arrivals, leaving, settle times, hard leases, renewals,
// wake-ups, Close). No store, actor, goroutine or clock is involved: the
// test plays the shard, feeding events and reading effects.

import (
	"errors"
	"fmt"
	"go/parser"
	"go/printer"
	"go/token"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

// world plays the shard for one key.
type world struct {
	t       *testing.T
	k       *keyState
	cfg     stepConfig
	now     time.Time
	closing bool
	fx      effects
	sent    time.Time  // when the op out was sent
	out     []opEffect // the operations out, oldest first
	replies map[*Request][]Reply
	cached  []Cached
	stops   map[*Request]error
	warns   []warning
	waiters int
	done    bool
	fence   uint64
}

func newWorld(t *testing.T) *world {
	return &world{t: t, k: &keyState{key: "k"}, now: t0, replies: map[*Request][]Reply{}, stops: map[*Request]error{}}
}

// step feeds ev and records its effects.
func (w *world) step(ev event) *effects {
	w.t.Helper()
	if w.done {
		w.t.Fatalf("a step after the key was forgotten: %v", ev.kind)
	}
	ev.now, ev.closing = w.now, w.closing
	w.fx.reset()
	w.k.step(&w.cfg, ev, &w.fx)
	fx := &w.fx
	for _, a := range fx.answers {
		w.replies[a.req] = append(w.replies[a.req], a.rep)
	}
	for _, b := range fx.broadcasts {
		for _, r := range b.reqs {
			w.replies[r] = append(w.replies[r], b.rep)
		}
	}
	for _, s := range fx.stops {
		w.stops[s.req] = s.cause
	}
	if fx.cache != nil {
		w.cached = append(w.cached, *fx.cache)
	}
	w.warns = append(w.warns, fx.warns...)
	w.waiters += fx.waiters
	if w.waiters != len(w.k.waiters) {
		w.t.Fatalf("waiter count effects sum to %d, the key has %d", w.waiters, len(w.k.waiters))
	}
	if len(fx.ops) > 0 {
		w.sent = w.now
	}
	w.out = append(w.out, fx.ops...)
	w.done = w.done || fx.done
	return fx
}

func req(mods ...func(*Request)) *Request {
	r := &Request{Key: "k", Lease: 9 * time.Second, TTL: time.Hour, Settle: forever}
	for _, m := range mods {
		m(r)
	}
	return r
}

func (w *world) arrive(r *Request) *Request {
	w.step(event{kind: evArrive, req: r})
	return r
}

// take removes and returns the oldest operation out, which must be of kind.
func (w *world) take(kind store.OpKind) opEffect {
	w.t.Helper()
	if len(w.out) == 0 {
		w.t.Fatalf("no store operation out, want %v", kind)
	}
	o := w.out[0]
	if o.kind != kind {
		w.t.Fatalf("store operation out = %v, want %v", o.kind, kind)
	}
	w.out = w.out[1:]
	return o
}

// answer takes the oldest operation (of kind) and feeds the store's answer.
func (w *world) answer(kind store.OpKind, res store.ClaimResult, err error) {
	w.t.Helper()
	oe := w.take(kind)
	o := &store.Op{Kind: kind, Key: "k", Token: oe.token, Record: oe.record, TTL: oe.ttl, Lease: oe.lease,
		Claim: store.ClaimRequest{Lease: oe.lease, TTL: oe.ttl, Fingerprint: oe.fp}, Result: res, Err: err}
	evk := map[store.OpKind]eventKind{store.OpClaim: evClaimed, store.OpComplete: evCompleted,
		store.OpRelease: evReleased, store.OpRenew: evRenewed}[kind]
	w.step(event{kind: evk, op: o, sent: w.sent})
}

func (w *world) granted() {
	w.t.Helper()
	w.fence++
	w.answer(store.OpClaim, store.ClaimResult{Status: store.Claimed, Token: store.Token{Fence: w.fence, Owner: "o"}, Attempt: 1,
		LeaseLeft: 9 * time.Second}, nil)
}

func (w *world) finish(r *Request, kind Kind, err error) {
	f := &Finish{Req: r, Kind: kind, Err: err}
	if kind == Success {
		f.Record, f.Value = store.Record{Value: []byte(`"v"`)}, "v"
	}
	w.step(event{kind: evFinish, fin: f})
}

func (w *world) stored() store.ClaimResult {
	return store.ClaimResult{Record: store.Record{Value: []byte(`"v"`), ExpiresAt: w.now.Add(time.Hour), Token: store.Token{Fence: w.fence, Owner: "o"}}}
}

// last returns r's last reply.
func (w *world) last(r *Request) Reply {
	w.t.Helper()
	reps := w.replies[r]
	if len(reps) == 0 {
		w.t.Fatalf("no reply to %p", r)
	}
	return reps[len(reps)-1]
}

func (w *world) wantReply(r *Request, kind Kind) Reply {
	w.t.Helper()
	rep := w.last(r)
	if rep.Kind != kind {
		w.t.Fatalf("reply = %v (err %v), want %v", rep.Kind, rep.Err, kind)
	}
	return rep
}

// wantSilent checks that r has had no reply but its Grant.
func (w *world) wantSilent(r *Request) {
	w.t.Helper()
	for _, rep := range w.replies[r] {
		if rep.Kind != Grant {
			w.t.Fatalf("a caller that should have no answer yet has %+v", rep)
		}
	}
}

func (w *world) wantOps(kinds ...store.OpKind) {
	w.t.Helper()
	var got []store.OpKind
	for _, o := range w.out {
		got = append(got, o.kind)
	}
	if !slices.Equal(got, kinds) {
		w.t.Fatalf("operations out = %v, want %v", got, kinds)
	}
}

func (w *world) wantPhase(p phase) {
	w.t.Helper()
	if w.done {
		w.t.Fatalf("key forgotten, want phase %d", p)
	}
	if w.k.phase != p {
		w.t.Fatalf("phase = %d, want %d", w.k.phase, p)
	}
}

func (w *world) wantDone() {
	w.t.Helper()
	if !w.done {
		w.t.Fatalf("key still has state (phase %d, %d waiters), want it forgotten", w.k.phase, len(w.k.waiters))
	}
}

// situation is the local state a key is in when a store answer comes.
type situation struct {
	name string
	// set adds callers to the key before the answer; it returns the ones
	// that must get the same answer as a plain waiter (wait) and the ones
	// that must be turned away once the holder is known (away).
	set func(w *world) (wait, away []*Request)
}

var situations = []situation{
	{"alone", func(*world) (wait, away []*Request) { return nil, nil }},
	{"waiters", func(w *world) (wait, away []*Request) {
		return []*Request{w.arrive(req()), w.arrive(req(settle(time.Minute)))}, nil
	}},
	{"other fingerprint", func(w *world) (wait, away []*Request) {
		return []*Request{w.arrive(req(fp("a")))}, []*Request{w.arrive(req(fp("b")))}
	}},
}

// TestClaimAnswers: every Claim outcome against each situation.
func TestClaimAnswers(t *testing.T) {
	for _, sit := range situations {
		t.Run(sit.name+"/claimed", func(t *testing.T) {
			w := newWorld(t)
			owner := w.arrive(req(fp("a")))
			wait, away := sit.set(w)
			w.granted()
			rep := w.wantReply(owner, Grant)
			if rep.Attempt != 1 || rep.Token.Fence != 1 || rep.Takeover {
				t.Fatalf("claim facts = %+v", rep)
			}
			w.wantPhase(phRunning)
			for _, r := range wait {
				w.wantSilent(r)
			}
			for _, r := range away {
				w.wantReply(r, FailMismatch)
			}
			if w.k.timer.kind != 0 && len(w.fx.timers) == 0 {
				t.Fatal("no renewal armed")
			}
		})
		t.Run(sit.name+"/completed", func(t *testing.T) {
			w := newWorld(t)
			owner := w.arrive(req())
			wait, away := sit.set(w)
			w.answer(store.OpClaim, store.ClaimResult{Status: store.Completed, Record: w.stored().Record}, nil)
			for _, r := range append(append([]*Request{owner}, wait...), away...) {
				// Fingerprints are checked by the caller against the record.
				w.wantReply(r, Settled)
			}
			if len(w.cached) != 1 {
				t.Fatalf("cached %d results, want 1", len(w.cached))
			}
			w.wantDone()
		})
		t.Run(sit.name+"/completed but ended", func(t *testing.T) {
			w := newWorld(t)
			w.arrive(req())
			sit.set(w)
			rec := w.stored().Record
			rec.ExpiresAt = w.now
			w.answer(store.OpClaim, store.ClaimResult{Status: store.Completed, Record: rec}, nil)
			w.wantOps(store.OpClaim) // asked again, once
			w.answer(store.OpClaim, store.ClaimResult{Status: store.Completed, Record: rec}, nil)
			w.wantDone() // a second ended record is taken as it is, not asked for ever
			if len(w.cached) != 0 {
				t.Fatal("an ended record was cached")
			}
		})
		t.Run(sit.name+"/in progress", func(t *testing.T) {
			w := newWorld(t)
			owner := w.arrive(req(fp("a")))
			wait, away := sit.set(w)
			w.answer(store.OpClaim, store.ClaimResult{Status: store.InProgress, LeaseLeft: time.Second, Fingerprint: []byte("a")}, nil)
			w.wantPhase(phRemote)
			for _, r := range append([]*Request{owner}, wait...) {
				w.wantSilent(r)
			}
			for _, r := range away {
				w.wantReply(r, FailMismatch)
			}
			if w.k.waiters[0] != owner {
				t.Fatal("the candidate is not first in line")
			}
		})
		t.Run(sit.name+"/store error", func(t *testing.T) {
			w := newWorld(t)
			owner := w.arrive(req())
			wait, away := sit.set(w)
			w.answer(store.OpClaim, store.ClaimResult{}, errors.New("connection reset"))
			for _, r := range append(append([]*Request{owner}, wait...), away...) {
				rep := w.wantReply(r, FailStore)
				if rep.Op != store.OpClaim {
					t.Fatalf("op = %v", rep.Op)
				}
			}
			w.wantDone()
		})
	}
	t.Run("takeover", func(t *testing.T) {
		w := newWorld(t)
		owner := w.arrive(req())
		w.answer(store.OpClaim, store.ClaimResult{Status: store.Claimed, Takeover: true, Attempt: 3, Token: store.Token{Fence: 7}}, nil)
		if c := w.last(owner); !c.Takeover || c.Token.Fence != 7 || c.Attempt != 3 {
			t.Fatalf("claim facts = %+v", c)
		}
	})
	t.Run("attempt past 65535", func(t *testing.T) {
		w := newWorld(t)
		owner := w.arrive(req())
		w.answer(store.OpClaim, store.ClaimResult{Status: store.Claimed, Takeover: true, Attempt: 70_000, Token: store.Token{Fence: 9}}, nil)
		if c := w.last(owner); c.Attempt != 65535 {
			t.Fatalf("attempt = %d, want 65535", c.Attempt)
		}
	})
	t.Run("candidate left", func(t *testing.T) {
		w := newWorld(t)
		owner := w.arrive(req())
		next := w.arrive(req())
		w.step(event{kind: evLeave, req: owner})
		w.granted()
		w.wantSilent(owner)
		w.wantOps(store.OpRelease) // the claim holds the candidate's lease and fingerprint
		w.answer(store.OpRelease, store.ClaimResult{}, nil)
		w.wantOps(store.OpClaim)
		w.granted()
		w.wantReply(next, Grant)
		if a := w.last(next).Attempt; a != 1 {
			t.Fatalf("attempt = %d, want 1 (the candidate that left ran nothing)", a)
		}
	})
	t.Run("closing", func(t *testing.T) {
		w := newWorld(t)
		owner := w.arrive(req())
		waiter := w.arrive(req())
		w.closing = true
		w.step(event{kind: evClose})
		w.wantReply(owner, FailClosed)
		w.wantReply(waiter, FailClosed)
		w.granted()
		w.wantOps(store.OpRelease)
		w.answer(store.OpRelease, store.ClaimResult{}, nil)
		w.wantDone()
	})
}

// running returns a world whose key is owned by a caller that runs.
func running(t *testing.T, mods ...func(*Request)) (*world, *Request) {
	w := newWorld(t)
	owner := w.arrive(req(mods...))
	w.granted()
	w.wantReply(owner, Grant)
	return w, owner
}

// TestCompleteAnswers: every Complete outcome against each situation.
func TestCompleteAnswers(t *testing.T) {
	cases := []struct {
		name string
		err  error
		// then checks what follows for the owner, the waiters, and the key.
		then func(w *world, owner *Request, wait []*Request)
	}{
		{"stored", nil, func(w *world, owner *Request, wait []*Request) {
			w.wantReply(owner, Settled)
			for _, r := range wait {
				if !w.wantReply(r, Settled).Joined {
					w.t.Fatal("a waiter's reply does not say it joined")
				}
			}
			if len(w.cached) != 1 || w.cached[0].Value != "v" || w.cached[0].Record.Value != nil || w.cached[0].Size != 4 {
				w.t.Fatalf("cached %+v: want one copy, the owner's value, size 4", w.cached)
			}
			w.wantDone()
		}},
		{"lease lost", store.ErrLeaseLost, func(w *world, owner *Request, wait []*Request) {
			w.wantReply(owner, FailLeaseLost)
			if len(wait) == 0 {
				w.wantDone()
				return
			}
			w.wantOps(store.OpClaim) // the next waiter claims afresh
			w.wantPhase(phClaiming)
		}},
		{"store down", errors.New("i/o timeout"), func(w *world, owner *Request, wait []*Request) {
			w.wantReply(owner, FailStore)
			for _, r := range wait {
				w.wantSilent(r)
			}
			w.wantPhase(phFinishing)
			// Retried past the local lease: the store decides.
			for range 20 {
				w.now = w.now.Add(time.Second)
				w.step(event{kind: evTimer, timer: timerRetry})
				if len(w.out) > 0 {
					w.answer(store.OpComplete, store.ClaimResult{}, errors.New("i/o timeout"))
				}
			}
			w.step(event{kind: evTimer, timer: timerRetry})
			w.answer(store.OpComplete, w.stored(), nil)
			for _, r := range wait {
				w.wantReply(r, Settled)
			}
			w.wantDone()
		}},
		{"refused", fmt.Errorf("value too large: %w", store.ErrInvalidArgument), func(w *world, owner *Request, wait []*Request) {
			w.wantReply(owner, FailStore)
			for _, r := range wait {
				w.wantReply(r, FailStore) // final: nobody runs it again
			}
			w.wantOps(store.OpRelease)
			w.answer(store.OpRelease, store.ClaimResult{}, nil)
			w.wantDone()
		}},
		{"store closed", store.ErrClosed, func(w *world, owner *Request, wait []*Request) {
			w.wantReply(owner, FailStore)
			for _, r := range wait {
				w.wantReply(r, FailStore)
			}
			w.wantOps(store.OpRelease)
		}},
	}
	for _, sit := range situations[:2] {
		for _, c := range cases {
			t.Run(sit.name+"/"+c.name, func(t *testing.T) {
				w, owner := running(t)
				wait, _ := sit.set(w)
				w.finish(owner, Success, nil)
				w.wantPhase(phFinishing)
				w.answer(store.OpComplete, w.stored(), c.err)
				c.then(w, owner, wait)
			})
		}
	}
	t.Run("retries end with the TTL", func(t *testing.T) {
		w, owner := running(t)
		waiter := w.arrive(req())
		w.finish(owner, Success, nil)
		w.answer(store.OpComplete, store.ClaimResult{}, errors.New("down"))
		w.now = w.now.Add(2 * time.Hour)
		w.step(event{kind: evTimer, timer: timerRetry})
		w.answer(store.OpComplete, store.ClaimResult{}, errors.New("down"))
		w.wantReply(waiter, FailStore)
		w.wantOps(store.OpRelease)
	})
	t.Run("retries end with Close", func(t *testing.T) {
		w, owner := running(t)
		w.arrive(req())
		w.finish(owner, Success, nil)
		w.closing = true
		w.step(event{kind: evClose})
		w.answer(store.OpComplete, store.ClaimResult{}, errors.New("down"))
		w.wantDone()
	})
	t.Run("a wake-up sends a retry at once", func(t *testing.T) {
		w, owner := running(t)
		waiter := w.arrive(req())
		w.finish(owner, Success, nil)
		w.step(event{kind: evWake}) // the Complete is out: nothing more goes
		w.wantOps(store.OpComplete)
		w.answer(store.OpComplete, store.ClaimResult{}, errors.New("down"))
		w.wantOps() // it waits for its retry timer
		w.step(event{kind: evWake})
		if tm := w.fx.timers[0]; !tm.at.IsZero() {
			t.Fatalf("timer %+v, want the retry timer disarmed", tm)
		}
		w.wantOps(store.OpComplete)
		w.step(event{kind: evWake}) // out again: nothing more goes
		w.wantOps(store.OpComplete)
		w.answer(store.OpComplete, w.stored(), nil)
		w.wantReply(waiter, Settled)
		w.wantDone()
	})
	t.Run("owner stored it itself", func(t *testing.T) {
		w, owner := running(t)
		waiter := w.arrive(req())
		f := &Finish{Req: owner, Kind: Success, Value: "v", Stored: true}
		f.Own = Cached{Record: w.stored().Record, Value: "v"}
		f.Result = &f.Own
		w.step(event{kind: evFinish, fin: f})
		w.wantSilent(owner) // it has its answer
		w.wantReply(waiter, Settled)
		// The shard holds neither request any more: the owner's Finish
		// (which lives in it) was copied, the waiter has its last reply.
		// (the waiter's hold goes with its settled broadcast).
		if len(w.fx.drops) != 1 || w.fx.drops[0] != owner {
			t.Fatalf("drops = %v", w.fx.drops)
		}
		if len(w.fx.broadcasts) != 1 || w.fx.broadcasts[0].rep.Kind != Settled || !slices.Contains(w.fx.broadcasts[0].reqs, waiter) {
			t.Fatalf("broadcasts = %+v", w.fx.broadcasts)
		}
		w.wantDone()
	})
	t.Run("owner's own Complete failed", func(t *testing.T) {
		w, owner := running(t)
		waiter := w.arrive(req())
		f := &Finish{Req: owner, Kind: Success, Value: "v", Stored: true, StoreErr: errors.New("down"),
			Record: store.Record{Value: []byte(`"v"`)}}
		w.step(event{kind: evFinish, fin: f})
		w.wantSilent(owner)
		w.step(event{kind: evTimer, timer: timerRetry})
		if o := w.take(store.OpComplete); string(o.record.Value) != `"v"` {
			t.Fatalf("retried record = %q", o.record.Value)
		}
		w.wantSilent(waiter)
	})
}

// TestReleaseAnswers: a transient failure releases the claim; every Release
// outcome.
func TestReleaseAnswers(t *testing.T) {
	for _, sit := range situations[:2] {
		t.Run(sit.name+"/released", func(t *testing.T) {
			w, owner := running(t)
			wait, _ := sit.set(w)
			boom := errors.New("boom")
			w.finish(owner, Transient, boom)
			w.wantSilent(owner) // until the store has released it
			w.answer(store.OpRelease, store.ClaimResult{}, nil)
			if rep := w.wantReply(owner, FailOwner); rep.Err != boom {
				t.Fatalf("owner's error = %v", rep.Err)
			}
			if len(wait) == 0 {
				w.wantDone()
				return
			}
			w.granted() // the first waiter claims afresh: a new record, the store's attempt 1
			if rep := w.wantReply(wait[0], Grant); rep.Attempt != 1 {
				t.Fatalf("attempt = %d, want the store's, 1", rep.Attempt)
			}
			w.wantSilent(wait[1])
		})
		t.Run(sit.name+"/lease lost", func(t *testing.T) {
			w, owner := running(t)
			wait, _ := sit.set(w)
			w.finish(owner, Transient, errors.New("boom"))
			w.answer(store.OpRelease, store.ClaimResult{}, store.ErrLeaseLost)
			w.wantReply(owner, FailOwner)
			if len(wait) == 0 {
				w.wantDone()
			} else {
				w.wantOps(store.OpClaim)
			}
		})
		t.Run(sit.name+"/store down", func(t *testing.T) {
			w, owner := running(t)
			wait, _ := sit.set(w)
			w.finish(owner, Transient, errors.New("boom"))
			w.answer(store.OpRelease, store.ClaimResult{}, errors.New("down"))
			w.wantReply(owner, FailOwner)
			w.wantPhase(phReleasing)
			w.step(event{kind: evTimer, timer: timerRetry})
			w.wantOps(store.OpRelease)
			// Past the lease, it gives up: the store's claim ends by itself.
			w.now = w.now.Add(10 * time.Second)
			w.answer(store.OpRelease, store.ClaimResult{}, errors.New("down"))
			if len(wait) == 0 {
				w.wantDone()
			} else {
				w.wantOps(store.OpClaim)
			}
		})
	}
	t.Run("panic goes to everyone", func(t *testing.T) {
		w, owner := running(t)
		waiter := w.arrive(req())
		w.finish(owner, Panic, errors.New("panic: x"))
		w.wantReply(waiter, FailOwner)
		w.answer(store.OpRelease, store.ClaimResult{}, nil)
		w.wantReply(owner, FailOwner)
		w.wantDone()
	})
	t.Run("settle-zero caller while releasing", func(t *testing.T) {
		w, owner := running(t)
		w.finish(owner, Transient, errors.New("boom"))
		r := w.arrive(req(settle(0)))
		w.wantReply(r, FailConflict)
	})
	t.Run("owner leaves at its grant", func(t *testing.T) {
		w, owner := running(t)
		next := w.arrive(req())
		w.step(event{kind: evLeave, req: owner})
		w.answer(store.OpRelease, store.ClaimResult{}, nil)
		w.granted()
		w.wantReply(next, Grant)
	})
}

// TestRenewAnswers: every Renew outcome.
func TestRenewAnswers(t *testing.T) {
	t.Run("renewed from when it was sent", func(t *testing.T) {
		w, _ := running(t)
		w.now = w.now.Add(3 * time.Second)
		w.step(event{kind: evTimer, timer: timerRenew})
		sent := w.now
		w.now = w.now.Add(time.Second)
		w.answer(store.OpRenew, store.ClaimResult{}, nil)
		if !w.k.leaseAt.Equal(sent) {
			t.Fatalf("lease counted from %v, want %v", w.k.leaseAt, sent)
		}
		if at := w.fx.timers[0].at; !at.Equal(sent.Add(3 * time.Second)) {
			t.Fatalf("next renewal at %v", at)
		}
	})
	t.Run("lease lost stops the run and refuses its result", func(t *testing.T) {
		w, owner := running(t)
		waiter := w.arrive(req())
		w.step(event{kind: evTimer, timer: timerRenew})
		w.answer(store.OpRenew, store.ClaimResult{}, store.ErrLeaseLost)
		if !errors.Is(w.stops[owner], store.ErrLeaseLost) {
			t.Fatalf("owner stopped with %v", w.stops[owner])
		}
		w.wantPhase(phLost)
		w.finish(owner, Success, nil)
		w.wantReply(owner, FailLeaseLost)
		w.wantOps(store.OpClaim)
		w.wantSilent(waiter)
		if len(w.warns) == 0 {
			t.Fatal("no warning")
		}
	})
	t.Run("lease lost while the owner stored it itself", func(t *testing.T) {
		w, owner := running(t)
		w.step(event{kind: evTimer, timer: timerRenew})
		w.answer(store.OpRenew, store.ClaimResult{}, store.ErrLeaseLost)
		f := &Finish{Req: owner, Kind: Success, Value: "v", Stored: true}
		f.Own = Cached{Record: w.stored().Record, Value: "v"}
		f.Result = &f.Own
		w.step(event{kind: evFinish, fin: f})
		w.wantDone()
		if len(w.warns) != 0 {
			t.Fatalf("warned %v: the store's answer stands", w.warns)
		}
	})
	t.Run("store down is retried and stops the run past the lease", func(t *testing.T) {
		w, owner := running(t)
		w.step(event{kind: evTimer, timer: timerRenew})
		w.answer(store.OpRenew, store.ClaimResult{}, errors.New("down"))
		if w.stops[owner] != nil {
			t.Fatal("stopped within the lease")
		}
		w.now = w.now.Add(10 * time.Second)
		w.step(event{kind: evTimer, timer: timerRenew})
		w.answer(store.OpRenew, store.ClaimResult{}, errors.New("down"))
		if !errors.Is(w.stops[owner], store.ErrLeaseLost) {
			t.Fatal("not stopped past the lease")
		}
		w.wantPhase(phRunning)
	})
	t.Run("an owner storing its result itself is renewed no more", func(t *testing.T) {
		w, owner := running(t)
		waiter := w.arrive(req())
		w.step(event{kind: evTimer, timer: timerRenew}) // one renewal out
		w.step(event{kind: evQuiet, req: owner})
		if len(w.fx.timers) != 1 || !w.fx.timers[0].at.IsZero() {
			t.Fatalf("quiet set timers %v, want the renewal timer cancelled", w.fx.timers)
		}
		// The renewal out comes back lost (the transaction held the row,
		// then committed): the owner's Finish decides, not the renewal.
		w.answer(store.OpRenew, store.ClaimResult{}, store.ErrLeaseLost)
		if w.stops[owner] != nil {
			t.Fatal("a renewal's answer stopped an owner that is storing its result")
		}
		w.wantPhase(phRunning)
		w.step(event{kind: evTimer, timer: timerRenew}) // a stale timer fires
		w.wantOps()
		w.now = w.now.Add(time.Minute)
		w.step(event{kind: evTimer, timer: timerLeaseEnd}) // and past the lease's end
		if w.stops[owner] != nil {
			t.Fatal("the lease's end stopped an owner that is storing its result")
		}
		f := &Finish{Req: owner, Kind: Success, Value: "v", Stored: true}
		f.Own = Cached{Record: w.stored().Record, Value: "v"}
		f.Result = &f.Own
		w.step(event{kind: evFinish, fin: f})
		w.wantReply(waiter, Settled)
		w.wantDone()
	})
	t.Run("quiet from another request or under a hard lease changes nothing", func(t *testing.T) {
		w, _ := running(t)
		w.step(event{kind: evQuiet, req: req()})
		w.step(event{kind: evTimer, timer: timerRenew})
		w.wantOps(store.OpRenew)

		w2 := newWorld(t)
		hard := w2.arrive(req(func(r *Request) { r.NoRenew = true }))
		w2.granted()
		w2.step(event{kind: evQuiet, req: hard})
		if hard.quiet || len(w2.fx.timers) != 0 {
			t.Fatalf("a hard lease's owner was quieted (timers %v)", w2.fx.timers)
		}
	})
	t.Run("a failure retries no later than the lease's end", func(t *testing.T) {
		w, _ := running(t)
		w.now = w.now.Add(7 * time.Second)
		w.step(event{kind: evTimer, timer: timerRenew})
		w.answer(store.OpRenew, store.ClaimResult{}, errors.New("down"))
		if at := w.fx.timers[len(w.fx.timers)-1].at; !at.Equal(t0.Add(9 * time.Second)) {
			t.Fatalf("next renewal at %v, want at the lease's end (9s)", at.Sub(t0))
		}
	})
	t.Run("no answer by the lease's end stops the run, and its result is still offered", func(t *testing.T) {
		w, owner := running(t)
		waiter := w.arrive(req())
		w.now = w.now.Add(3 * time.Second)
		w.step(event{kind: evTimer, timer: timerRenew})
		if tm := w.fx.timers[len(w.fx.timers)-1]; tm.kind != timerLeaseEnd || !tm.at.Equal(t0.Add(9*time.Second)) {
			t.Fatalf("timer %+v, want the lease's end at 9s while the renewal is out", tm)
		}
		w.now = t0.Add(9 * time.Second)
		w.step(event{kind: evTimer, timer: timerLeaseEnd})
		if !errors.Is(w.stops[owner], store.ErrLeaseLost) {
			t.Fatalf("owner stopped with %v, want ErrLeaseLost", w.stops[owner])
		}
		w.wantPhase(phRunning) // the key stays its owner's
		w.wantSilent(waiter)
		w.finish(owner, Success, nil)
		w.wantPhase(phFinishing)
		// The renewal's late answer is for a run already over.
		w.answer(store.OpRenew, store.ClaimResult{}, errors.New("down"))
		w.answer(store.OpComplete, w.stored(), nil)
		w.wantReply(owner, Settled)
		w.wantReply(waiter, Settled)
		w.wantDone()
	})
	t.Run("a renewal answered in time disarms the lease's end", func(t *testing.T) {
		w, owner := running(t)
		w.now = w.now.Add(3 * time.Second)
		w.step(event{kind: evTimer, timer: timerRenew})
		w.answer(store.OpRenew, store.ClaimResult{}, nil)
		if tm := w.fx.timers[len(w.fx.timers)-1]; tm.kind != timerRenew {
			t.Fatalf("timer %+v, want the next renewal", tm)
		}
		w.now = t0.Add(9 * time.Second)
		w.step(event{kind: evTimer, timer: timerLeaseEnd}) // a stale tick
		if w.stops[owner] != nil {
			t.Fatal("stopped within the renewed lease")
		}
	})
	t.Run("an earlier owner's answer changes nothing", func(t *testing.T) {
		w, owner := running(t)
		w.step(event{kind: evTimer, timer: timerRenew})
		oe := w.take(store.OpRenew)
		oe.token.Fence = 99
		w.step(event{kind: evRenewed, op: &store.Op{Kind: store.OpRenew, Token: oe.token, Err: store.ErrLeaseLost}})
		w.wantPhase(phRunning)
		if w.stops[owner] != nil {
			t.Fatal("stopped by another owner's answer")
		}
	})
}

// TestLocalEvents: what callers and timers do to a key, whatever the store.
func TestLocalEvents(t *testing.T) {
	t.Run("settle zero conflicts with the lease left", func(t *testing.T) {
		w, _ := running(t)
		w.now = w.now.Add(4 * time.Second)
		r := w.arrive(req(settle(0)))
		if rep := w.wantReply(r, FailConflict); rep.LeaseLeft != 5*time.Second {
			t.Fatalf("lease left = %v", rep.LeaseLeft)
		}
	})
	t.Run("settle time ends", func(t *testing.T) {
		w, _ := running(t)
		short := w.arrive(req(settle(time.Second)))
		long := w.arrive(req(settle(time.Minute)))
		w.now = w.now.Add(time.Second)
		w.step(event{kind: evSettle})
		w.wantReply(short, FailConflict)
		w.wantSilent(long)
		if !w.k.settleAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("settle timer at %v", w.k.settleAt)
		}
	})
	t.Run("a promoted waiter keeps its settle time while it claims", func(t *testing.T) {
		w, owner := running(t)
		next := w.arrive(req(settle(2 * time.Second)))
		w.finish(owner, Transient, errors.New("x"))
		w.answer(store.OpRelease, store.ClaimResult{}, nil)
		w.now = w.now.Add(2 * time.Second)
		w.step(event{kind: evSettle})
		w.wantReply(next, FailConflict)
		w.granted()
		w.wantOps(store.OpRelease) // it left: the claim goes back
	})
	t.Run("a parked caller that leaves is not answered", func(t *testing.T) {
		w, _ := running(t)
		r := w.arrive(req())
		w.step(event{kind: evLeave, req: r})
		if len(w.k.waiters) != 0 || r.where != gone {
			t.Fatal("still parked")
		}
	})
	t.Run("the last remote waiter leaving forgets the key", func(t *testing.T) {
		w := newWorld(t)
		r := w.arrive(req())
		w.answer(store.OpClaim, store.ClaimResult{Status: store.InProgress, LeaseLeft: time.Second}, nil)
		w.step(event{kind: evLeave, req: r})
		w.wantDone()
	})
	t.Run("hard lease: let go at its end when someone waits", func(t *testing.T) {
		w, owner := running(t, noRenew)
		w.now = w.now.Add(9 * time.Second)
		w.step(event{kind: evTimer, timer: timerLeaseEnd})
		w.wantPhase(phRunning) // nobody waits
		r := w.arrive(req())
		if !errors.Is(w.stops[owner], store.ErrLeaseLost) {
			t.Fatal("owner not stopped")
		}
		w.wantOps(store.OpClaim)
		w.granted()
		w.wantReply(r, Grant)
		w.finish(owner, Success, nil) // the old owner's result is refused
		w.wantReply(owner, FailLeaseLost)
	})
	t.Run("hard lease: let go at its end when a caller already waits", func(t *testing.T) {
		w, owner := running(t, noRenew)
		r := w.arrive(req())
		w.now = w.now.Add(9 * time.Second)
		w.step(event{kind: evTimer, timer: timerLeaseEnd})
		if !errors.Is(w.stops[owner], store.ErrLeaseLost) {
			t.Fatal("owner not stopped")
		}
		w.granted()
		w.wantReply(r, Grant)
	})
	t.Run("in progress with nobody left to wait forgets the key", func(t *testing.T) {
		w := newWorld(t)
		r := w.arrive(req())
		w.step(event{kind: evLeave, req: r})
		w.answer(store.OpClaim, store.ClaimResult{Status: store.InProgress, LeaseLeft: time.Minute}, nil)
		w.wantDone()
		w.wantSilent(r)
	})
	t.Run("remote key re-claimed on wake", func(t *testing.T) {
		w := newWorld(t)
		w.arrive(req())
		w.answer(store.OpClaim, store.ClaimResult{Status: store.InProgress, LeaseLeft: time.Minute}, nil)
		w.step(event{kind: evWake})
		w.wantOps(store.OpClaim)
	})
	t.Run("wake while claiming asks again", func(t *testing.T) {
		w := newWorld(t)
		w.arrive(req())
		w.step(event{kind: evWake})
		w.answer(store.OpClaim, store.ClaimResult{Status: store.InProgress, LeaseLeft: time.Minute}, nil)
		w.wantOps(store.OpClaim)
	})
	t.Run("re-claim timer bounded by the holder's lease", func(t *testing.T) {
		w := newWorld(t)
		w.cfg = stepConfig{waker: true}
		w.arrive(req())
		w.answer(store.OpClaim, store.ClaimResult{Status: store.InProgress, LeaseLeft: 50 * time.Millisecond}, nil)
		if at := w.fx.timers[len(w.fx.timers)-1].at; !at.Equal(t0.Add(51 * time.Millisecond)) {
			t.Fatalf("re-claim at %v", at.Sub(t0))
		}
		w.now = w.now.Add(51 * time.Millisecond)
		w.step(event{kind: evTimer, timer: timerReclaim})
		w.wantOps(store.OpClaim)
	})
	t.Run("Close stops a running owner and still stores its result", func(t *testing.T) {
		w, owner := running(t)
		waiter := w.arrive(req())
		w.closing = true
		w.step(event{kind: evClose})
		w.wantReply(waiter, FailClosed)
		if !errors.Is(w.stops[owner], store.ErrClosed) {
			t.Fatal("owner not stopped")
		}
		w.finish(owner, Success, nil)
		w.answer(store.OpComplete, w.stored(), nil)
		w.wantReply(owner, Settled)
		w.wantDone()
	})
	t.Run("Close forgets a remote key", func(t *testing.T) {
		w := newWorld(t)
		r := w.arrive(req())
		w.answer(store.OpClaim, store.ClaimResult{Status: store.InProgress, LeaseLeft: time.Minute}, nil)
		w.closing = true
		w.step(event{kind: evClose})
		w.wantReply(r, FailClosed)
		w.wantDone()
	})
	t.Run("stop answers everyone", func(t *testing.T) {
		w, owner := running(t)
		waiter := w.arrive(req())
		w.step(event{kind: evStop})
		w.wantReply(owner, FailClosed)
		w.wantReply(waiter, FailClosed)
		w.wantDone()
	})
	t.Run("a key a Clear deletes caches nothing", func(t *testing.T) {
		w, owner := running(t)
		w.k.noCache = true
		w.finish(owner, Success, nil)
		w.answer(store.OpComplete, w.stored(), nil)
		w.wantReply(owner, Settled)
		if len(w.cached) != 0 {
			t.Fatal("cached")
		}
	})
	t.Run("a stale Finish", func(t *testing.T) {
		var fx effects
		r := req()
		r.expired = true
		staleFinish(&Finish{Req: r, Kind: Success}, &fx)
		if len(fx.answers) != 1 || fx.answers[0].rep.Kind != FailLeaseLost {
			t.Fatalf("answers = %+v", fx.answers)
		}
	})
}

// TestStepIsPure: the transition function's files import nothing that does
// I/O, and use no goroutine, channel, lock or clock.
func TestStepIsPure(t *testing.T) {
	for _, file := range []string{"state.go", "step.go"} {
		src, err := readSource(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range src.imports {
			switch imp {
			case "bytes", "errors", "fmt", "math", "time", "github.com/idemrt/idem/store":
			default:
				t.Errorf("%s imports %s", file, imp)
			}
		}
		for _, bad := range []string{"time.Now", "time.Since", "time.After", "time.Sleep", "chan ", "go func", "sync.", "<-"} {
			if strings.Contains(src.code, bad) {
				t.Errorf("%s uses %q", file, bad)
			}
		}
	}
}

type source struct {
	imports []string
	code    string // the file without its comments
}

func readSource(file string) (source, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		return source{}, err
	}
	var src source
	for _, imp := range f.Imports {
		src.imports = append(src.imports, strings.Trim(imp.Path.Value, `"`))
	}
	f.Comments = nil
	var b strings.Builder
	if err := printer.Fprint(&b, fset, f); err != nil {
		return source{}, err
	}
	src.code = b.String()
	return src, nil
}

// A key parks at most maxWaiters callers; the next one is refused at once.
func TestWaitersPerKeyBound(t *testing.T) {
	w, _ := running(t)
	w.cfg.maxWaiters = 2
	a, b := w.arrive(req()), w.arrive(req())
	w.wantSilent(a)
	w.wantSilent(b)
	c := w.arrive(req())
	w.wantReply(c, FailOverloaded)
	if len(w.k.waiters) != 2 {
		t.Fatalf("%d waiters, want 2", len(w.k.waiters))
	}
}

// A result the store refuses for its size is replaced by the small
// permanent record of Config.Oversized: the owner and every waiter get it
// once it is stored, the key is never released (its function ran), and a
// refusal of the small record too is final.
func TestTooLargeIsStoredAsPermanent(t *testing.T) {
	permanent := errors.New("result too large")
	var refused []store.Record
	oversized := func(key string, rec store.Record, err error) (store.Record, error) {
		if key != "k" || !errors.Is(err, store.ErrTooLarge) {
			t.Errorf("oversized(%q, %v)", key, err)
		}
		refused = append(refused, rec)
		return store.Record{Failed: true, Error: "too large"}, permanent
	}
	tooLarge := fmt.Errorf("2 MB over the server's 1 MB: %w", store.ErrTooLarge)
	for _, sit := range situations[:2] {
		t.Run(sit.name, func(t *testing.T) {
			refused = nil
			w, owner := running(t)
			w.cfg.oversized = oversized
			wait, _ := sit.set(w)
			w.finish(owner, Success, nil)
			w.answer(store.OpComplete, store.ClaimResult{}, tooLarge)
			if len(refused) != 1 || string(refused[0].Value) != `"v"` {
				t.Fatalf("oversized got %+v, want the refused result", refused)
			}
			w.wantSilent(owner)
			for _, r := range wait {
				w.wantSilent(r)
			}
			o := w.take(store.OpComplete)
			if !o.record.Failed || o.record.Error != "too large" || o.token != w.k.token {
				t.Fatalf("second Complete %+v, want the small permanent record under the owner's token", o)
			}
			w.step(event{kind: evCompleted, op: &store.Op{Kind: store.OpComplete, Key: "k", Token: o.token, Record: o.record,
				Result: store.ClaimResult{Record: store.Record{Failed: true, Error: "too large", Token: o.token}}}})
			for _, r := range append([]*Request{owner}, wait...) {
				rep := w.wantReply(r, Settled)
				if rep.Result.Err != permanent || !rep.Result.Record.Failed {
					t.Fatalf("reply %+v, want the permanent error", rep.Result)
				}
			}
			w.wantOps()
			w.wantDone()
		})
	}
	t.Run("the small record refused too", func(t *testing.T) {
		w, owner := running(t)
		w.cfg.oversized = oversized
		waiter := w.arrive(req())
		w.finish(owner, Success, nil)
		w.answer(store.OpComplete, store.ClaimResult{}, tooLarge)
		w.answer(store.OpComplete, store.ClaimResult{}, tooLarge)
		w.wantReply(owner, FailStore)
		w.wantReply(waiter, FailStore)
		w.wantOps(store.OpRelease)
	})
	t.Run("without Oversized, as any refusal", func(t *testing.T) {
		w, owner := running(t)
		waiter := w.arrive(req())
		w.finish(owner, Success, nil)
		w.answer(store.OpComplete, store.ClaimResult{}, tooLarge)
		w.wantReply(owner, FailStore)
		w.wantReply(waiter, FailStore)
	})
}

// Once the small permanent record of one owner is refused (its lease was
// lost: the key was taken over meanwhile), the next owner this key state
// grants is a fresh run: a result of its own refused for its size is
// stored as the permanent error too, not released for yet another run.
func TestTooLargeOncePerOwner(t *testing.T) {
	oversized := func(key string, rec store.Record, err error) (store.Record, error) {
		return store.Record{Failed: true, Error: "too large"}, errors.New("result too large")
	}
	tooLarge := fmt.Errorf("2 MB over the server's 1 MB: %w", store.ErrTooLarge)
	w, owner := running(t)
	w.cfg.oversized = oversized
	next := w.arrive(req())
	w.finish(owner, Success, nil)
	w.answer(store.OpComplete, store.ClaimResult{}, tooLarge)
	o := w.take(store.OpComplete)
	if !o.record.Failed {
		t.Fatalf("second Complete %+v, want the small permanent record", o)
	}
	// The key was taken over meanwhile: the small record is refused too.
	w.step(event{kind: evCompleted, op: &store.Op{Kind: store.OpComplete, Key: "k", Token: o.token, Record: o.record, Err: store.ErrLeaseLost}})
	w.wantReply(owner, FailLeaseLost)
	// The waiter claims afresh and is granted the key (the other holder
	// released it), runs, and its result is too large as well.
	w.granted()
	w.wantReply(next, Grant)
	w.finish(next, Success, nil)
	w.answer(store.OpComplete, store.ClaimResult{}, tooLarge)
	w.wantSilent(next)
	w.wantOps(store.OpComplete) // the small permanent record, not a Release
	if o := w.take(store.OpComplete); !o.record.Failed || o.record.Error != "too large" {
		t.Fatalf("Complete %+v, want the small permanent record", o)
	}
}

// The small permanent record that replaces a too-large result is a Complete
// like any other: a transient failure of it is retried with the same small
// record (never the refused one, never a Release), and the waiters get the
// permanent error once it is stored.
func TestTooLargeRecordRetried(t *testing.T) {
	permanent := errors.New("result too large")
	oversized := func(key string, rec store.Record, err error) (store.Record, error) {
		return store.Record{Failed: true, Error: "too large"}, permanent
	}
	w, owner := running(t)
	w.cfg.oversized = oversized
	waiter := w.arrive(req())
	w.finish(owner, Success, nil)
	w.answer(store.OpComplete, store.ClaimResult{}, fmt.Errorf("big: %w", store.ErrTooLarge))
	w.answer(store.OpComplete, store.ClaimResult{}, errors.New("connection reset"))
	w.wantReply(owner, FailStore)
	w.wantSilent(waiter)
	w.wantOps()
	w.now = w.now.Add(time.Second)
	w.step(event{kind: evTimer, timer: timerRetry})
	o := w.take(store.OpComplete)
	if !o.record.Failed || o.record.Error != "too large" || len(o.record.Value) != 0 {
		t.Fatalf("retried Complete %+v, want the small permanent record", o.record)
	}
	w.step(event{kind: evCompleted, op: &store.Op{Kind: store.OpComplete, Key: "k", Token: o.token, Record: o.record,
		Result: store.ClaimResult{Record: store.Record{Failed: true, Error: "too large", Token: o.token, ExpiresAt: w.now.Add(time.Hour)}}}})
	if rep := w.wantReply(waiter, Settled); rep.Result.Err != permanent {
		t.Fatalf("waiter got %+v, want the permanent error", rep.Result)
	}
	w.wantDone()
}
