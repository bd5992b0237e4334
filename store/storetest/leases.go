package storetest

import (
	"fmt"
	"testing"

	"github.com/idemrt/idem/store"
)

func (s *suite) takeover(t *testing.T) {
	st := s.h.New(t)
	var old store.Token
	key := s.whileLive(t, func(key string) error {
		old = s.mustClaim(t, st, key, "owner-1", s.short())
		if res := s.claim(t, st, key, "owner-2", s.long(), nil); res.Status != store.InProgress {
			return fmt.Errorf("claim during a live lease = %v, want in-progress (a lease never expires early)", res.Status)
		}
		if s.h.Exact {
			s.h.Advance(t, s.h.Unit-1)
			if res := s.claim(t, st, key, "owner-2", s.long(), nil); res.Status != store.InProgress || res.LeaseLeft != 1 {
				return fmt.Errorf("claim 1ns before the lease ends = %v (left %v), want in-progress with 1ns left", res.Status, res.LeaseLeft)
			}
			return nil
		}
		s.h.Advance(t, s.h.Unit/2)
		if res := s.claim(t, st, key, "owner-2", s.long(), nil); res.Status != store.InProgress {
			return fmt.Errorf("claim half way through the lease = %v, want in-progress", res.Status)
		}
		return nil
	})
	s.expire(t)
	res := s.claim(t, st, key, "owner-2", s.long(), nil)
	if res.Status != store.Claimed || !res.Takeover {
		t.Fatalf("claim after the lease = %v takeover=%v, want a claimed takeover", res.Status, res.Takeover)
	}
	if res.Token.Fence <= old.Fence {
		t.Fatalf("takeover fence %d, want more than %d", res.Token.Fence, old.Fence)
	}
}

func (s *suite) staleOwnerFenced(t *testing.T) {
	st := s.h.New(t)
	old := s.mustClaim(t, st, "k", "owner-1", s.short())
	s.expire(t)
	cur := s.mustClaim(t, st, "k", "owner-2", s.long())
	_, err := st.Complete(ctx, "k", old, store.Record{Value: []byte("stale")}, s.long())
	wantErr(t, "stale Complete", err, store.ErrLeaseLost)
	wantErr(t, "stale Renew", st.Renew(ctx, "k", old, s.long()), store.ErrLeaseLost)
	wantErr(t, "stale Release", st.Release(ctx, "k", old), store.ErrLeaseLost)
	forged := store.Token{Fence: cur.Fence, Owner: "owner-1"}
	_, err = st.Complete(ctx, "k", forged, store.Record{Value: []byte("forged")}, s.long())
	wantErr(t, "Complete with the right fence and the wrong owner", err, store.ErrLeaseLost)
	rec, err := st.Complete(ctx, "k", cur, store.Record{Value: []byte("new")}, s.long())
	if err != nil || string(rec.Value) != "new" {
		t.Fatalf("current owner's Complete = %q, %v", rec.Value, err)
	}
	_, err = st.Complete(ctx, "k", old, store.Record{Value: []byte("stale")}, s.long())
	wantErr(t, "stale Complete after completion", err, store.ErrLeaseLost)
	got, err := st.Get(ctx, "k")
	if err != nil || string(got.Value) != "new" {
		t.Fatalf("Get = %q, %v; want the new owner's result", got.Value, err)
	}
}

func (s *suite) completeAfterExpiryUntaken(t *testing.T) {
	st := s.h.New(t)
	tok := s.mustClaim(t, st, "k", "owner-1", s.short())
	s.expire(t)
	if err := st.Renew(ctx, "k", tok, s.long()); err != nil {
		t.Fatalf("Renew after expiry, untaken: %v", err)
	}
	if res := s.claim(t, st, "k", "owner-2", s.long(), nil); res.Status != store.InProgress {
		t.Fatalf("claim after the renewal = %v, want in-progress", res.Status)
	}
	tok2 := s.mustClaim(t, st, "k2", "owner-1", s.short())
	s.expire(t)
	if _, err := st.Complete(ctx, "k2", tok2, store.Record{Value: []byte("v")}, s.long()); err != nil {
		t.Fatalf("Complete after expiry, untaken: %v", err)
	}
}

func (s *suite) releaseGivesKeyBack(t *testing.T) {
	st := s.h.New(t)
	if err := st.Release(ctx, "absent", store.Token{Fence: 1, Owner: "x"}); err != nil {
		t.Fatalf("Release of an absent key: %v, want nil", err)
	}
	tok := s.mustClaim(t, st, "k", "owner-1", s.long())
	wantErr(t, "Release by another owner", st.Release(ctx, "k", store.Token{Fence: tok.Fence, Owner: "owner-2"}), store.ErrLeaseLost)
	if err := st.Release(ctx, "k", tok); err != nil {
		t.Fatal(err)
	}
	next := s.mustClaim(t, st, "k", "owner-2", s.long())
	if next.Fence <= tok.Fence {
		t.Fatalf("fence after release %d, want more than %d", next.Fence, tok.Fence)
	}
	if _, err := st.Complete(ctx, "k", next, store.Record{Value: []byte("v")}, s.long()); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "Release of a completed key", st.Release(ctx, "k", next), store.ErrLeaseLost)
	if got, err := st.Get(ctx, "k"); err != nil || string(got.Value) != "v" {
		t.Fatalf("Release removed a completed record: %q, %v", got.Value, err)
	}
}

func (s *suite) renewKeepsClaim(t *testing.T) {
	st := s.h.New(t)
	tok := s.mustClaim(t, st, "k", "owner-1", s.short())
	if err := st.Renew(ctx, "k", tok, s.long()); err != nil {
		t.Fatal(err)
	}
	s.expire(t)
	if res := s.claim(t, st, "k", "owner-2", s.long(), nil); res.Status != store.InProgress {
		t.Fatalf("claim after a renewal = %v, want in-progress", res.Status)
	}
	wantErr(t, "Renew of an absent key", st.Renew(ctx, "absent", tok, s.long()), store.ErrLeaseLost)
	if _, err := st.Complete(ctx, "k", tok, store.Record{}, s.long()); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "Renew of a completed key", st.Renew(ctx, "k", tok, s.long()), store.ErrLeaseLost)
}
