package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

// random runs random operation sequences against the store and the model and
// compares every reply.
func (s *suite) random(t *testing.T) {
	for seed := range s.h.Seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			s.randomSeq(t, uint64(seed))
		})
	}
}

// randomKeys are the keys a random sequence calls on; randomFingerprints
// the fingerprints its claims and completions carry.
var (
	randomKeys         = []string{"r:a", "r:b", "r:{c}", "r:d"}
	randomFingerprints = [][]byte{nil, []byte("fp1"), []byte("fp2")}
)

// randomSeq runs one sequence: each step picks a key and an operation, calls
// the store, and checks the reply against the model.
func (s *suite) randomSeq(t *testing.T, seed uint64) {
	r := &randomRun{s: s, t: t, st: s.h.New(t), seed: seed,
		rng: rand.New(rand.NewPCG(seed, 0x1de)),
		m:   &model{h: s.h, virtual: time.Unix(0, 0), keys: map[string]*modelKey{}}}
	for range s.h.RandomOps {
		k := randomKeys[r.rng.IntN(len(randomKeys))]
		mk := r.m.key(k)
		switch op := r.rng.IntN(20); {
		case op < 1:
			r.log = append(r.log, "advance")
			r.m.advance(t)
		case op < 7:
			r.claim(k, mk)
		case op < 10:
			r.complete(k, mk)
		case op < 12:
			r.release(k, mk)
		case op < 15:
			r.renew(k, mk)
		case op < 18:
			r.get(k, mk)
		default:
			r.forget(k, mk)
		}
	}
}

// randomRun is one random sequence under way.
type randomRun struct {
	s      *suite
	t      *testing.T
	st     store.Store
	seed   uint64
	rng    *rand.Rand
	m      *model
	owners int      // owners named so far
	log    []string // the operations so far
}

// fail ends the test with the seed and the last operations.
func (r *randomRun) fail(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("seed %d, after %d ops (last ones: %v): %s", r.seed, len(r.log), tail(r.log, 8), fmt.Sprintf(format, args...))
}

// dur picks a lease or TTL: a third of the time a short one, which ends
// at the next advance.
func (r *randomRun) dur() (d time.Duration, short bool) {
	if r.rng.IntN(3) == 0 {
		return r.s.short(), true
	}
	return r.s.long(), false
}

// pickToken picks the token of a call that needs one: mostly one the store
// handed out for the key (the holder's half the time), sometimes a forged
// one.
func (r *randomRun) pickToken(mk *modelKey) store.Token {
	if len(mk.tokens) == 0 || r.rng.IntN(8) == 0 {
		return store.Token{Fence: uint64(r.rng.IntN(5) + 1), Owner: "forged"}
	}
	if mk.state == "progress" && r.rng.IntN(2) == 0 {
		return mk.token
	}
	return mk.tokens[r.rng.IntN(len(mk.tokens))]
}

// settle checks a reply against each state the key could have been in
// while the call ran (from b to a), and keeps the first state that explains
// it.
func (r *randomRun) settle(mk *modelKey, b, a time.Time, check func(w *modelKey) error) {
	r.t.Helper()
	var first error
	for _, w := range worlds(mk, b, a) {
		err := check(&w)
		if err == nil {
			*mk = w
			return
		}
		if first == nil {
			first = err
		}
	}
	r.fail("%v", first)
}

// claim claims k for a new owner or, now and then, as the holder's replay.
func (r *randomRun) claim(k string, mk *modelKey) {
	owner := fmt.Sprint("o", r.owners)
	replay := mk.state == "progress" && r.rng.IntN(5) == 0
	if replay {
		owner = mk.token.Owner
	} else {
		r.owners++
	}
	lease, short := r.dur()
	fp := randomFingerprints[r.rng.IntN(len(randomFingerprints))]
	r.log = append(r.log, fmt.Sprintf("claim(%s,%s,%v)", k, owner, lease))
	b := r.m.now()
	res, err := r.st.Claim(ctx, k, store.ClaimRequest{Owner: owner, Lease: lease, TTL: r.s.long(), Fingerprint: fp})
	a := r.m.now()
	if err != nil {
		r.fail("claim: %v", err)
	}
	r.settle(mk, b, a, func(w *modelKey) error {
		switch {
		case w.state == "done":
			if res.Status != store.Completed {
				return fmt.Errorf("claim of a completed key = %v", res.Status)
			}
			return r.s.sameRecord(res.Record, w.rec, w.recCall+a.Sub(b))
		case w.state == "progress" && w.token.Owner == owner:
			if res.Status != store.Claimed || res.Token != w.token || res.Attempt != w.attempt {
				return fmt.Errorf("replayed claim = %v %+v attempt %d, want claimed %+v attempt %d",
					res.Status, res.Token, res.Attempt, w.token, w.attempt)
			}
		case w.state == "progress" && !w.leaseOver:
			if res.Status != store.InProgress || res.Token.Fence != w.token.Fence || !bytes.Equal(res.Fingerprint, w.fp) {
				return fmt.Errorf("claim during a live lease = %v fence %d fp %q, want in-progress fence %d fp %q",
					res.Status, res.Token.Fence, res.Fingerprint, w.token.Fence, w.fp)
			}
		default:
			wantTakeover, wantAttempt := w.state == "progress", uint32(1)
			if wantTakeover {
				wantAttempt = w.attempt + 1
			}
			if res.Status != store.Claimed || res.Takeover != wantTakeover || res.Attempt != wantAttempt {
				return fmt.Errorf("claim = %v takeover=%v attempt=%d, want claimed takeover=%v attempt=%d",
					res.Status, res.Takeover, res.Attempt, wantTakeover, wantAttempt)
			}
			if res.Token.Fence <= w.lastFence || res.Token.Owner != owner {
				return fmt.Errorf("new token %+v: want owner %s and a fence above %d", res.Token, owner, w.lastFence)
			}
			w.state, w.token, w.leaseEnd, w.fp = "progress", res.Token, r.m.grant(lease, short, b, a), fp
			w.lastFence, w.attempt = res.Token.Fence, res.Attempt
			w.tokens = append(w.tokens, res.Token)
		}
		return nil
	})
}

// complete completes k with a value or a permanent error.
func (r *randomRun) complete(k string, mk *modelKey) {
	tok := r.pickToken(mk)
	ttl, short := r.dur()
	rec := store.Record{Value: []byte(fmt.Sprint("value-", r.rng.Uint32())), Fingerprint: randomFingerprints[r.rng.IntN(len(randomFingerprints))]}
	if r.rng.IntN(4) == 0 {
		rec = store.Record{Failed: true, Error: fmt.Sprint("declined-", r.rng.Uint32()), Fingerprint: rec.Fingerprint}
	}
	r.log = append(r.log, fmt.Sprintf("complete(%s,%+v,%v)", k, tok, ttl))
	b := r.m.now()
	got, err := r.st.Complete(ctx, k, tok, rec, ttl)
	a := r.m.now()
	r.settle(mk, b, a, func(w *modelKey) error {
		switch {
		case w.state == "done" && w.rec.Token == tok:
			if err != nil {
				return fmt.Errorf("replayed complete: %v", err)
			}
			return r.s.sameRecord(got, w.rec, w.recCall+a.Sub(b))
		case w.state == "progress" && w.token == tok:
			if err != nil {
				return fmt.Errorf("complete by the holder: %v", err)
			}
			want := rec
			want.Token = tok
			if err := r.s.recordErr("complete", got, want, ttl); err != nil {
				return err
			}
			w.state, w.rec, w.recCall, w.recEnd = "done", got, a.Sub(b), r.m.grant(ttl, short, b, a)
		default:
			if !errors.Is(err, store.ErrLeaseLost) {
				return fmt.Errorf("complete by a non-holder: %v, want ErrLeaseLost", err)
			}
		}
		return nil
	})
}

// release releases k.
func (r *randomRun) release(k string, mk *modelKey) {
	tok := r.pickToken(mk)
	r.log = append(r.log, fmt.Sprintf("release(%s,%+v)", k, tok))
	b := r.m.now()
	err := r.st.Release(ctx, k, tok)
	a := r.m.now()
	r.settle(mk, b, a, func(w *modelKey) error {
		switch {
		case w.state == "":
			if err != nil {
				return fmt.Errorf("release of an absent key: %v", err)
			}
		case w.state == "progress" && w.token == tok:
			if err != nil {
				return fmt.Errorf("release by the holder: %v", err)
			}
			w.state = ""
		default:
			if !errors.Is(err, store.ErrLeaseLost) {
				return fmt.Errorf("release by a non-holder: %v, want ErrLeaseLost", err)
			}
		}
		return nil
	})
}

// renew renews the lease on k.
func (r *randomRun) renew(k string, mk *modelKey) {
	tok := r.pickToken(mk)
	lease, short := r.dur()
	r.log = append(r.log, fmt.Sprintf("renew(%s,%+v,%v)", k, tok, lease))
	b := r.m.now()
	err := r.st.Renew(ctx, k, tok, lease)
	a := r.m.now()
	r.settle(mk, b, a, func(w *modelKey) error {
		if w.state == "progress" && w.token == tok {
			if err != nil {
				return fmt.Errorf("renew by the holder: %v", err)
			}
			w.leaseEnd = r.m.grant(lease, short, b, a)
		} else if !errors.Is(err, store.ErrLeaseLost) {
			return fmt.Errorf("renew by a non-holder: %v, want ErrLeaseLost", err)
		}
		return nil
	})
}

// get reads k.
func (r *randomRun) get(k string, mk *modelKey) {
	r.log = append(r.log, fmt.Sprintf("get(%s)", k))
	b := r.m.now()
	got, err := r.st.Get(ctx, k)
	a := r.m.now()
	r.settle(mk, b, a, func(w *modelKey) error {
		if w.state == "done" {
			if err != nil {
				return fmt.Errorf("get of a completed key: %v", err)
			}
			return r.s.sameRecord(got, w.rec, w.recCall+a.Sub(b))
		}
		if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("get of a key in state %q: %v, want ErrNotFound", w.state, err)
		}
		return nil
	})
}

// forget forgets k.
func (r *randomRun) forget(k string, mk *modelKey) {
	r.log = append(r.log, fmt.Sprintf("forget(%s)", k))
	b := r.m.now()
	err := r.st.Forget(ctx, k)
	a := r.m.now()
	r.settle(mk, b, a, func(w *modelKey) error {
		switch w.state {
		case "progress":
			if !errors.Is(err, store.ErrInProgress) {
				return fmt.Errorf("forget of a key in progress: %v, want ErrInProgress", err)
			}
		case "done":
			if err != nil {
				return fmt.Errorf("forget: %v", err)
			}
			w.state = ""
		default:
			if err != nil {
				return fmt.Errorf("forget of an absent key: %v", err)
			}
		}
		return nil
	})
}

// sameRecord compares a record read back with the one the store returned
// before. A store on real time reports times on the caller's clock by way
// of its reply (see redisstore), so each read is off by up to the length of
// the call that made it: calls is the length of both calls, added to the
// tolerance.
func (s *suite) sameRecord(got, want store.Record, calls time.Duration) error {
	if !sameContent(got, want) {
		return fmt.Errorf("record %+v, want %+v", got, want)
	}
	tol := s.h.Unit/10 + calls
	if d := got.ExpiresAt.Sub(want.ExpiresAt); d < -tol || d > tol {
		return fmt.Errorf("record expires at %v, want %v (±%v)", got.ExpiresAt, want.ExpiresAt, tol)
	}
	if d := got.CreatedAt.Sub(want.CreatedAt); d < -tol || d > tol {
		return fmt.Errorf("record created at %v, want %v (±%v)", got.CreatedAt, want.CreatedAt, tol)
	}
	return nil
}

func tail(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
