package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

// fenceRun claims one key again and again through every way its record can
// end or go on, and checks after each claim that the fence rose above
// every earlier one and that Attempt counts the claims of the record.
type fenceRun struct {
	s    *suite
	t    *testing.T
	st   store.Store
	key  string
	last store.Token // the last claim's token
	n    int         // owners named so far
}

// claim claims the key for a new owner with lease and checks the answer:
// claimed, with takeover as given, attempt want and a fence above the last.
func (r *fenceRun) claim(what string, lease time.Duration, takeover bool, want uint32) store.Token {
	r.t.Helper()
	r.n++
	owner := fmt.Sprint("owner-", r.n)
	res := r.s.claim(r.t, r.st, r.key, owner, lease, nil)
	if res.Status != store.Claimed || res.Takeover != takeover || res.Attempt != want {
		r.t.Fatalf("%s: claim = %v takeover=%v attempt=%d, want claimed takeover=%v attempt=%d",
			what, res.Status, res.Takeover, res.Attempt, takeover, want)
	}
	if res.Token.Fence <= r.last.Fence {
		r.t.Fatalf("%s: fence %d, want more than the last one, %d", what, res.Token.Fence, r.last.Fence)
	}
	if again := r.s.claim(r.t, r.st, r.key, owner, lease, nil); again.Status != store.Claimed ||
		again.Token != res.Token || again.Attempt != want || again.Takeover {
		r.t.Fatalf("%s: the holder's claim again = %v %+v takeover=%v attempt=%d, want claimed %+v attempt=%d",
			what, again.Status, again.Token, again.Takeover, again.Attempt, res.Token, want)
	}
	r.last = res.Token
	return res.Token
}

func (r *fenceRun) complete(ttl time.Duration) {
	r.t.Helper()
	if _, err := r.st.Complete(ctx, r.key, r.last, store.Record{Value: []byte("v")}, ttl); err != nil {
		r.t.Fatalf("Complete: %v", err)
	}
}

// fencesRise: a key's fences rise across takeovers, releases, Forget and
// the expiry of its result, and Attempt is 1 for the claim that creates
// a record, one more for each takeover, the same for the holder's claim
// sent again, and 1 again once a release, a Forget or an expiry ended
// the record.
func (s *suite) fencesRise(t *testing.T) {
	r := &fenceRun{s: s, t: t, st: s.h.New(t), key: "k"}
	r.claim("first claim", s.short(), false, 1)
	s.expire(t)
	r.claim("takeover", s.short(), true, 2)
	s.expire(t)
	r.claim("second takeover", s.long(), true, 3)
	if err := r.st.Release(ctx, r.key, r.last); err != nil {
		t.Fatal(err)
	}
	r.claim("claim after a release", s.long(), false, 1)
	r.complete(s.long())
	if err := r.st.Forget(ctx, r.key); err != nil {
		t.Fatal(err)
	}
	r.claim("claim after a Forget", s.short(), false, 1)
	s.expire(t)
	r.claim("takeover after a Forget", s.long(), true, 2)
	r.complete(s.short())
	s.expire(t)
	if _, err := r.st.Get(ctx, r.key); err == nil {
		t.Fatal("Get after the result's TTL found the record")
	}
	r.claim("claim after the result expired", s.long(), false, 1)
	if err := r.st.Release(ctx, r.key, r.last); err != nil {
		t.Fatal(err)
	}
	r.claim("claim after another release", s.long(), false, 1)
	r.complete(s.long())
	if err := r.st.Forget(ctx, r.key); err != nil {
		t.Fatal(err)
	}
	r.claim("claim at once after a Forget", s.long(), false, 1)
}

// fencesRiseOnEveryKey: a key claimed, completed, forgotten and claimed
// again at once, over and over (within a millisecond on a fast store),
// gets a larger fence each time; so does a key whose claim is released
// and taken again.
func (s *suite) fencesRiseOnEveryKey(t *testing.T) {
	st := s.h.New(t)
	var last [2]uint64
	for i := range 50 {
		for j, key := range []string{"forgotten", "released"} {
			tok := s.mustClaim(t, st, key, fmt.Sprint("owner-", i), s.long())
			if tok.Fence <= last[j] {
				t.Fatalf("%s, claim %d: fence %d, want more than %d", key, i, tok.Fence, last[j])
			}
			last[j] = tok.Fence
			if key == "released" {
				if err := st.Release(ctx, key, tok); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if _, err := st.Complete(ctx, key, tok, store.Record{}, s.long()); err != nil {
				t.Fatal(err)
			}
			if err := st.Forget(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
	}
}
