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

// modelKey is the reference model's view of one key. Time is counted in
// Advance steps: a short lease or TTL ends at the next step, a long one never.
type modelKey struct {
	state     string // "", "progress", "done"
	token     store.Token
	leaseEnd  int // step at which the lease has ended; -1: never
	fp        []byte
	rec       store.Record
	recEnd    int // step at which the record has ended; -1: never
	lastFence uint64
	tokens    []store.Token // every token the store handed out for the key
}

type model struct {
	step int
	keys map[string]*modelKey
}

func (m *model) key(k string) *modelKey {
	mk := m.keys[k]
	if mk == nil {
		mk = &modelKey{}
		m.keys[k] = mk
	}
	return mk
}

func (m *model) advance() {
	m.step++
	for _, mk := range m.keys {
		if mk.state == "done" && mk.recEnd >= 0 && mk.recEnd <= m.step {
			mk.state, mk.lastFence = "", 0
		}
	}
}

func (mk *modelKey) leaseLive(step int) bool { return mk.leaseEnd < 0 || mk.leaseEnd > step }

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
	m := &model{keys: map[string]*modelKey{}}
	keys := []string{"r:a", "r:b", "r:{c}", "r:d"}
	fps := [][]byte{nil, []byte("fp1"), []byte("fp2")}
	owners := 0
	dur := func() (time.Duration, int) {
		if rng.IntN(3) == 0 {
			return s.short(), m.step + 1
		}
		return s.long(), -1
	}
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, after %d ops (last ones: %v): %s", seed, len(log), tail(log, 8), fmt.Sprintf(format, args...))
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
			s.h.Advance(t, 2*s.h.Unit)
			m.advance()
		case op < 7: // claim
			owner := fmt.Sprint("o", owners)
			replay := mk.state == "progress" && rng.IntN(5) == 0
			if replay {
				owner = mk.token.Owner
			} else {
				owners++
			}
			lease, leaseEnd := dur()
			fp := fps[rng.IntN(len(fps))]
			log = append(log, fmt.Sprintf("claim(%s,%s,%v)", k, owner, lease))
			res, err := st.Claim(ctx, k, store.ClaimRequest{Owner: owner, Lease: lease, TTL: s.long(), Fingerprint: fp})
			if err != nil {
				fail("claim: %v", err)
			}
			switch {
			case mk.state == "done":
				if res.Status != store.Completed {
					fail("claim of a completed key = %v", res.Status)
				}
				s.sameRecord(fail, res.Record, mk.rec)
			case mk.state == "progress" && mk.token.Owner == owner:
				if res.Status != store.Claimed || res.Token != mk.token {
					fail("replayed claim = %v %+v, want claimed %+v", res.Status, res.Token, mk.token)
				}
			case mk.state == "progress" && mk.leaseLive(m.step):
				if res.Status != store.InProgress || res.Token.Fence != mk.token.Fence || !bytes.Equal(res.Fingerprint, mk.fp) {
					fail("claim during a live lease = %v fence %d fp %q, want in-progress fence %d fp %q",
						res.Status, res.Token.Fence, res.Fingerprint, mk.token.Fence, mk.fp)
				}
			default:
				wantTakeover := mk.state == "progress"
				if res.Status != store.Claimed || res.Takeover != wantTakeover {
					fail("claim = %v takeover=%v, want claimed takeover=%v", res.Status, res.Takeover, wantTakeover)
				}
				if res.Token.Fence <= mk.lastFence || res.Token.Owner != owner {
					fail("new token %+v: want owner %s and a fence above %d", res.Token, owner, mk.lastFence)
				}
				mk.state, mk.token, mk.leaseEnd, mk.fp = "progress", res.Token, leaseEnd, fp
				mk.lastFence = res.Token.Fence
				mk.tokens = append(mk.tokens, res.Token)
			}
		case op < 10: // complete
			tok := pickToken(mk)
			ttl, recEnd := dur()
			rec := store.Record{Value: []byte(fmt.Sprint("value-", rng.Uint32())), Fingerprint: fps[rng.IntN(len(fps))]}
			if rng.IntN(4) == 0 {
				rec = store.Record{Failed: true, Error: fmt.Sprint("declined-", rng.Uint32()), Fingerprint: rec.Fingerprint}
			}
			log = append(log, fmt.Sprintf("complete(%s,%+v,%v)", k, tok, ttl))
			got, err := st.Complete(ctx, k, tok, rec, ttl)
			switch {
			case mk.state == "done" && mk.rec.Token == tok:
				if err != nil {
					fail("replayed complete: %v", err)
				}
				s.sameRecord(fail, got, mk.rec)
			case mk.state == "progress" && mk.token == tok:
				if err != nil {
					fail("complete by the holder: %v", err)
				}
				rec.Token = tok
				s.checkRecord(t, "complete", got, rec, ttl)
				mk.state, mk.rec, mk.recEnd = "done", got, recEnd
			default:
				if !errors.Is(err, store.ErrLeaseLost) {
					fail("complete by a non-holder: %v, want ErrLeaseLost", err)
				}
			}
		case op < 12: // fail
			tok := pickToken(mk)
			log = append(log, fmt.Sprintf("fail(%s,%+v)", k, tok))
			err := st.Fail(ctx, k, tok)
			switch {
			case mk.state == "":
				if err != nil {
					fail("fail of an absent key: %v", err)
				}
			case mk.state == "progress" && mk.token == tok:
				if err != nil {
					fail("fail by the holder: %v", err)
				}
				mk.state = ""
			default:
				if !errors.Is(err, store.ErrLeaseLost) {
					fail("fail by a non-holder: %v, want ErrLeaseLost", err)
				}
			}
		case op < 15: // extend
			tok := pickToken(mk)
			lease, leaseEnd := dur()
			log = append(log, fmt.Sprintf("extend(%s,%+v,%v)", k, tok, lease))
			err := st.Extend(ctx, k, tok, lease)
			if mk.state == "progress" && mk.token == tok {
				if err != nil {
					fail("extend by the holder: %v", err)
				}
				mk.leaseEnd = leaseEnd
			} else if !errors.Is(err, store.ErrLeaseLost) {
				fail("extend by a non-holder: %v, want ErrLeaseLost", err)
			}
		case op < 18: // get
			log = append(log, fmt.Sprintf("get(%s)", k))
			got, err := st.Get(ctx, k)
			if mk.state == "done" {
				if err != nil {
					fail("get of a completed key: %v", err)
				}
				s.sameRecord(fail, got, mk.rec)
			} else if !errors.Is(err, store.ErrNotFound) {
				fail("get of a key in state %q: %v, want ErrNotFound", mk.state, err)
			}
		default: // forget
			log = append(log, fmt.Sprintf("forget(%s)", k))
			err := st.Forget(ctx, k)
			switch mk.state {
			case "progress":
				if !errors.Is(err, store.ErrInProgress) {
					fail("forget of a key in progress: %v, want ErrInProgress", err)
				}
			case "done":
				if err != nil {
					fail("forget: %v", err)
				}
				mk.state, mk.lastFence = "", 0
			default:
				if err != nil {
					fail("forget of an absent key: %v", err)
				}
			}
		}
	}
}

func (s *suite) sameRecord(fail func(string, ...any), got, want store.Record) {
	if !bytes.Equal(got.Value, want.Value) || got.Failed != want.Failed || got.Error != want.Error ||
		!bytes.Equal(got.Fingerprint, want.Fingerprint) || got.Token != want.Token {
		fail("record %+v, want %+v", got, want)
	}
	tol := s.h.Unit / 10
	if d := got.ExpiresAt.Sub(want.ExpiresAt); d < -tol || d > tol {
		fail("record expires at %v, want %v", got.ExpiresAt, want.ExpiresAt)
	}
	if d := got.CreatedAt.Sub(want.CreatedAt); d < -tol || d > tol {
		fail("record created at %v, want %v", got.CreatedAt, want.CreatedAt)
	}
}

func tail(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
