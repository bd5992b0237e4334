package storetest

import (
	"testing"

	"github.com/idemrt/idem/store"
)

// liveness checks store.Liveness, for stores that implement it: a beat
// keeps an instance live for its ttl; a claim that finds the key in
// progress names the holder; a claim naming a dead holder takes the key
// over only from that very owner.
func (s *suite) liveness(t *testing.T) {
	st := s.h.New(t)
	l, ok := st.(store.Liveness)
	if !ok {
		t.Skip("the store keeps no liveness records")
	}
	if err := l.Beat(ctx, "i1", s.short()); err != nil {
		t.Fatalf("Beat: %v", err)
	}
	if live, err := l.Live(ctx, "i1"); err != nil || !live {
		t.Fatalf("Live after a beat = %v, %v; want true", live, err)
	}
	if live, err := l.Live(ctx, "i2"); err != nil || live {
		t.Fatalf("Live of an instance that never beat = %v, %v; want false", live, err)
	}
	s.expire(t)
	if live, err := l.Live(ctx, "i1"); err != nil || live {
		t.Fatalf("Live after the ttl = %v, %v; want false", live, err)
	}
	if err := l.Beat(ctx, "i1", 0); err == nil {
		t.Fatal("Beat with a zero ttl: no error")
	}

	first := s.mustClaim(t, st, "k", "i1-1", s.long())
	res := s.claim(t, st, "k", "i2-1", s.long(), nil)
	if res.Status != store.InProgress || res.Holder != "i1-1" || res.Token.Owner != "" {
		t.Fatalf("claim of a held key = %v holder %q token %+v; want in progress, holder i1-1, no owner in the token",
			res.Status, res.Holder, res.Token)
	}
	req := store.ClaimRequest{Owner: "i2-2", Lease: s.long(), TTL: s.long(), Dead: "i1-2"}
	if res, err := st.Claim(ctx, "k", req); err != nil || res.Status != store.InProgress {
		t.Fatalf("claim naming another owner dead = %v, %v; want in progress", res.Status, err)
	}
	req.Dead = "i1-1"
	res, err := st.Claim(ctx, "k", req)
	if err != nil || res.Status != store.Claimed || !res.Takeover || res.Token.Fence <= first.Fence {
		t.Fatalf("claim naming the holder dead = %+v, %v; want a takeover with a higher fence", res, err)
	}
	if res.Attempt != 0 && res.Attempt != 2 {
		t.Fatalf("takeover attempt %d, want 2", res.Attempt)
	}
	if err := st.Renew(ctx, "k", first, s.long()); err == nil {
		t.Fatal("the dead holder renewed a key taken over")
	}
	// Dead is the caller's verdict on one owner: the new holder keeps the
	// key against a claim that names someone else.
	req.Owner, req.Dead = "i3-1", "i1-1"
	if res, err := st.Claim(ctx, "k", req); err != nil || res.Status != store.InProgress || res.Holder != "i2-2" {
		t.Fatalf("claim naming the former holder dead = %+v, %v; want in progress under i2-2", res, err)
	}
}
