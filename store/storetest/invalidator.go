package storetest

import (
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

// invalidator checks that a Forget that deletes a result is announced to
// a subscriber with its key, after the delete (a Get from the subscriber's
// callback finds nothing), that InvalidatePrefix is announced as a prefix,
// and that nothing reaches a stopped subscription.
func (s *suite) invalidator(t *testing.T) {
	st := s.h.New(t)
	iv, ok := st.(store.Invalidator)
	if !ok {
		t.Skip("store does not implement store.Invalidator")
	}
	type heard struct {
		inv      store.Invalidation
		stillGot bool // a Get of the key found the record
	}
	got := make(chan heard, 16)
	stop, err := iv.SubscribeInvalidations(ctx, func(inv store.Invalidation) {
		if inv.Lost {
			return // a store may report one after a reconnect
		}
		h := heard{inv: inv}
		if !inv.Prefix {
			_, err := st.Get(ctx, inv.Key)
			h.stillGot = err == nil
		}
		got <- h
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	next := func(what string) heard {
		t.Helper()
		select {
		case h := <-got:
			return h
		case <-time.After(10 * time.Second):
			t.Fatalf("no invalidation for %s within 10s", what)
		}
		return heard{}
	}
	tok := s.mustClaim(t, st, "inval", "owner-1", s.long())
	s.finish(t, st, "inval", tok, "complete")
	if err := st.Forget(ctx, "inval"); err != nil {
		t.Fatal(err)
	}
	if h := next("a Forget"); h.inv != (store.Invalidation{Key: "inval"}) || h.stillGot {
		t.Fatalf("after a Forget: %+v, want the key, once the record is gone", h)
	}
	if err := iv.InvalidatePrefix(ctx, "inv"); err != nil {
		t.Fatal(err)
	}
	if h := next("InvalidatePrefix"); h.inv != (store.Invalidation{Key: "inv", Prefix: true}) {
		t.Fatalf("after InvalidatePrefix: %+v", h.inv)
	}
	stop()
	tok = s.mustClaim(t, st, "after-stop", "owner-1", s.long())
	s.finish(t, st, "after-stop", tok, "complete")
	if err := st.Forget(ctx, "after-stop"); err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-got:
		t.Fatalf("an invalidation after stop: %+v", h.inv)
	case <-time.After(50 * time.Millisecond):
	}
}
