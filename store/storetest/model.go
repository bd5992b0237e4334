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

// modelKey is the reference model's view of one key.
type modelKey struct {
	state     string // "", "progress", "done"
	token     store.Token
	leaseEnd  ends // when the holder's lease ends
	leaseOver bool // set for one call: the lease had ended when it ran
	fp        []byte
	rec       store.Record
	recCall   time.Duration // how long the call that returned rec took
	recEnd    ends          // when the record ends
	lastFence uint64
	tokens    []store.Token // every token the store handed out for the key
}

// ends is when a short lease or TTL ends, as far as the suite can tell: not
// before from, and surely by to. The store starts it at some instant of the
// call that asked for it; on real time the suite only knows the call's start
// and end (and the store rounds to milliseconds), so a later call that
// overlaps the window may find it live or ended. On a fake clock (Exact) time
// moves only in Advance, so from and to are the same instant. The zero value
// is a long lease or TTL, which never ends during a test.
type ends struct{ from, to time.Time }

type phase int

const (
	live phase = iota
	over
	unsure
)

// at tells whether a call that ran from b to a found e live, ended, or
// either.
func (e ends) at(b, a time.Time) phase {
	switch {
	case e.from.IsZero() || a.Before(e.from):
		return live
	case !b.Before(e.to):
		return over
	}
	return unsure
}

// model keeps the time the suite believes the store's clock shows: with an
// Exact harness, the sum of the Advance calls (nothing else moves a fake
// clock); otherwise the wall clock, which a store on real time shares.
type model struct {
	h       Harness
	virtual time.Time
	keys    map[string]*modelKey
}

func (m *model) now() time.Time {
	if m.h.Exact {
		return m.virtual
	}
	return time.Now()
}

func (m *model) advance(t testing.TB) {
	m.h.Advance(t, 2*m.h.Unit)
	m.virtual = m.virtual.Add(2 * m.h.Unit)
}

// grant returns when a lease or TTL of d, asked for by a call that ran from b
// to a, ends; a long one (short false) never does.
func (m *model) grant(d time.Duration, short bool, b, a time.Time) ends {
	if !short {
		return ends{}
	}
	slack := time.Duration(0)
	if !m.h.Exact {
		slack = m.h.Unit / 10 // millisecond rounding, the server's cached clock
	}
	return ends{from: b.Add(d - slack), to: a.Add(d + slack)}
}

func (m *model) key(k string) *modelKey {
	mk := m.keys[k]
	if mk == nil {
		mk = &modelKey{}
		m.keys[k] = mk
	}
	return mk
}

// worlds returns the states mk could have been in when a call ran from b to
// a: one, or, when its short lease or record may have ended during the call,
// the one where it had not and the one where it had.
func worlds(mk *modelKey, b, a time.Time) []modelKey {
	w := *mk
	w.leaseOver = false
	var p phase
	switch w.state {
	case "progress":
		p = w.leaseEnd.at(b, a)
	case "done":
		p = w.recEnd.at(b, a)
	default:
		return []modelKey{w}
	}
	ended := w
	if w.state == "progress" {
		ended.leaseOver = true
	} else {
		ended.state, ended.lastFence = "", 0
	}
	switch p {
	case live:
		return []modelKey{w}
	case over:
		return []modelKey{ended}
	}
	return []modelKey{w, ended}
}

// random runs random operation sequences against the store and the model and
// compares every reply.
func (s *suite) random(t *testing.T) {
	for seed := range s.h.Seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			s.randomSeq(t, uint64(seed))
		})
	}
}

func (s *suite) randomSeq(t *testing.T, seed uint64) {
	st := s.h.New(t)
	rng := rand.New(rand.NewPCG(seed, 0x1de))
	m := &model{h: s.h, virtual: time.Unix(0, 0), keys: map[string]*modelKey{}}
	keys := []string{"r:a", "r:b", "r:{c}", "r:d"}
	fps := [][]byte{nil, []byte("fp1"), []byte("fp2")}
	owners := 0
	dur := func() (time.Duration, bool) {
		if rng.IntN(3) == 0 {
			return s.short(), true
		}
		return s.long(), false
	}
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, after %d ops (last ones: %v): %s", seed, len(log), tail(log, 8), fmt.Sprintf(format, args...))
	}
	// settle checks a reply against each state the key could have been in
	// while the call ran, and keeps the first state that explains it.
	settle := func(mk *modelKey, b, a time.Time, check func(w *modelKey) error) {
		t.Helper()
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
		fail("%v", first)
	}
	pickToken := func(mk *modelKey) store.Token {
		if len(mk.tokens) == 0 || rng.IntN(8) == 0 {
			return store.Token{Fence: uint64(rng.IntN(5) + 1), Owner: "forged"}
		}
		if mk.state == "progress" && rng.IntN(2) == 0 {
			return mk.token
		}
		return mk.tokens[rng.IntN(len(mk.tokens))]
	}
	for range s.h.RandomOps {
		k := keys[rng.IntN(len(keys))]
		mk := m.key(k)
		switch op := rng.IntN(20); {
		case op < 1:
			log = append(log, "advance")
			m.advance(t)
		case op < 7: // claim
			owner := fmt.Sprint("o", owners)
			replay := mk.state == "progress" && rng.IntN(5) == 0
			if replay {
				owner = mk.token.Owner
			} else {
				owners++
			}
			lease, short := dur()
			fp := fps[rng.IntN(len(fps))]
			log = append(log, fmt.Sprintf("claim(%s,%s,%v)", k, owner, lease))
			b := m.now()
			res, err := st.Claim(ctx, k, store.ClaimRequest{Owner: owner, Lease: lease, TTL: s.long(), Fingerprint: fp})
			a := m.now()
			if err != nil {
				fail("claim: %v", err)
			}
			settle(mk, b, a, func(w *modelKey) error {
				switch {
				case w.state == "done":
					if res.Status != store.Completed {
						return fmt.Errorf("claim of a completed key = %v", res.Status)
					}
					return s.sameRecord(res.Record, w.rec, w.recCall+a.Sub(b))
				case w.state == "progress" && w.token.Owner == owner:
					if res.Status != store.Claimed || res.Token != w.token {
						return fmt.Errorf("replayed claim = %v %+v, want claimed %+v", res.Status, res.Token, w.token)
					}
				case w.state == "progress" && !w.leaseOver:
					if res.Status != store.InProgress || res.Token.Fence != w.token.Fence || !bytes.Equal(res.Fingerprint, w.fp) {
						return fmt.Errorf("claim during a live lease = %v fence %d fp %q, want in-progress fence %d fp %q",
							res.Status, res.Token.Fence, res.Fingerprint, w.token.Fence, w.fp)
					}
				default:
					wantTakeover := w.state == "progress"
					if res.Status != store.Claimed || res.Takeover != wantTakeover {
						return fmt.Errorf("claim = %v takeover=%v, want claimed takeover=%v", res.Status, res.Takeover, wantTakeover)
					}
					if res.Token.Fence <= w.lastFence || res.Token.Owner != owner {
						return fmt.Errorf("new token %+v: want owner %s and a fence above %d", res.Token, owner, w.lastFence)
					}
					w.state, w.token, w.leaseEnd, w.fp = "progress", res.Token, m.grant(lease, short, b, a), fp
					w.lastFence = res.Token.Fence
					w.tokens = append(w.tokens, res.Token)
				}
				return nil
			})
		case op < 10: // complete
			tok := pickToken(mk)
			ttl, short := dur()
			rec := store.Record{Value: []byte(fmt.Sprint("value-", rng.Uint32())), Fingerprint: fps[rng.IntN(len(fps))]}
			if rng.IntN(4) == 0 {
				rec = store.Record{Failed: true, Error: fmt.Sprint("declined-", rng.Uint32()), Fingerprint: rec.Fingerprint}
			}
			log = append(log, fmt.Sprintf("complete(%s,%+v,%v)", k, tok, ttl))
			b := m.now()
			got, err := st.Complete(ctx, k, tok, rec, ttl)
			a := m.now()
			settle(mk, b, a, func(w *modelKey) error {
				switch {
				case w.state == "done" && w.rec.Token == tok:
					if err != nil {
						return fmt.Errorf("replayed complete: %v", err)
					}
					return s.sameRecord(got, w.rec, w.recCall+a.Sub(b))
				case w.state == "progress" && w.token == tok:
					if err != nil {
						return fmt.Errorf("complete by the holder: %v", err)
					}
					want := rec
					want.Token = tok
					if err := s.recordErr("complete", got, want, ttl); err != nil {
						return err
					}
					w.state, w.rec, w.recCall, w.recEnd = "done", got, a.Sub(b), m.grant(ttl, short, b, a)
				default:
					if !errors.Is(err, store.ErrLeaseLost) {
						return fmt.Errorf("complete by a non-holder: %v, want ErrLeaseLost", err)
					}
				}
				return nil
			})
		case op < 12: // fail
			tok := pickToken(mk)
			log = append(log, fmt.Sprintf("fail(%s,%+v)", k, tok))
			b := m.now()
			err := st.Release(ctx, k, tok)
			a := m.now()
			settle(mk, b, a, func(w *modelKey) error {
				switch {
				case w.state == "":
					if err != nil {
						return fmt.Errorf("fail of an absent key: %v", err)
					}
				case w.state == "progress" && w.token == tok:
					if err != nil {
						return fmt.Errorf("fail by the holder: %v", err)
					}
					w.state = ""
				default:
					if !errors.Is(err, store.ErrLeaseLost) {
						return fmt.Errorf("fail by a non-holder: %v, want ErrLeaseLost", err)
					}
				}
				return nil
			})
		case op < 15: // renew
			tok := pickToken(mk)
			lease, short := dur()
			log = append(log, fmt.Sprintf("renew(%s,%+v,%v)", k, tok, lease))
			b := m.now()
			err := st.Renew(ctx, k, tok, lease)
			a := m.now()
			settle(mk, b, a, func(w *modelKey) error {
				if w.state == "progress" && w.token == tok {
					if err != nil {
						return fmt.Errorf("renew by the holder: %v", err)
					}
					w.leaseEnd = m.grant(lease, short, b, a)
				} else if !errors.Is(err, store.ErrLeaseLost) {
					return fmt.Errorf("renew by a non-holder: %v, want ErrLeaseLost", err)
				}
				return nil
			})
		case op < 18: // get
			log = append(log, fmt.Sprintf("get(%s)", k))
			b := m.now()
			got, err := st.Get(ctx, k)
			a := m.now()
			settle(mk, b, a, func(w *modelKey) error {
				if w.state == "done" {
					if err != nil {
						return fmt.Errorf("get of a completed key: %v", err)
					}
					return s.sameRecord(got, w.rec, w.recCall+a.Sub(b))
				}
				if !errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("get of a key in state %q: %v, want ErrNotFound", w.state, err)
				}
				return nil
			})
		default: // forget
			log = append(log, fmt.Sprintf("forget(%s)", k))
			b := m.now()
			err := st.Forget(ctx, k)
			a := m.now()
			settle(mk, b, a, func(w *modelKey) error {
				switch w.state {
				case "progress":
					if !errors.Is(err, store.ErrInProgress) {
						return fmt.Errorf("forget of a key in progress: %v, want ErrInProgress", err)
					}
				case "done":
					if err != nil {
						return fmt.Errorf("forget: %v", err)
					}
					w.state, w.lastFence = "", 0
				default:
					if err != nil {
						return fmt.Errorf("forget of an absent key: %v", err)
					}
				}
				return nil
			})
		}
	}
}

// sameRecord compares a record read back with the one the store returned
// before. A store on real time reports times on the caller's clock by way
// of its reply (see redisstore), so each read is off by up to the length of
// the call that made it: calls is the length of both calls, added to the
// tolerance.
func (s *suite) sameRecord(got, want store.Record, calls time.Duration) error {
	if !bytes.Equal(got.Value, want.Value) || got.Failed != want.Failed || got.Error != want.Error ||
		!bytes.Equal(got.Fingerprint, want.Fingerprint) || got.Token != want.Token {
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
