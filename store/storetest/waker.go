package storetest

import (
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

// waker checks that a claim registered as a waiter is woken once when the
// holder completes or releases the key, and not when nobody waits or after
// the subscription stopped.
func (s *suite) waker(t *testing.T) {
	st := s.h.New(t)
	w, ok := st.(store.Waker)
	if !ok {
		t.Skip("store does not implement store.Waker")
	}
	woken := make(chan string, 16)
	id, stop, err := w.Subscribe(ctx, func(key string) {
		if key != "" {
			woken <- key
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, finish := range []string{"complete", "release"} {
		key := "wake-" + finish
		tok := s.waitOn(t, st, key, id)
		s.finish(t, st, key, tok, finish)
		select {
		case got := <-woken:
			if got != key {
				t.Fatalf("woken for %q, want %q", got, key)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no wake-up for %s within 10s", finish)
		}
	}
	// Nobody registered: no wake-up.
	tok := s.mustClaim(t, st, "quiet", "owner-1", s.long())
	s.finish(t, st, "quiet", tok, "complete")
	stop()
	tok = s.waitOn(t, st, "after-stop", id)
	s.finish(t, st, "after-stop", tok, "complete")
	select {
	case got := <-woken:
		if got == "quiet" || got == "after-stop" {
			t.Fatalf("unexpected wake-up for %q", got)
		}
	case <-time.After(50 * time.Millisecond):
	}
}

// waitOn claims key for owner-1, then claims it for owner-2 with id as the
// waiter; it returns owner-1's token.
func (s *suite) waitOn(t *testing.T, st store.Store, key, id string) store.Token {
	t.Helper()
	tok := s.mustClaim(t, st, key, "owner-1", s.long())
	res, err := st.Claim(ctx, key, store.ClaimRequest{Owner: "owner-2", Lease: s.long(), TTL: s.long(), Waiter: id})
	if err != nil || res.Status != store.InProgress {
		t.Fatalf("waiter claim: %v %v", res.Status, err)
	}
	return tok
}

// finish completes key with tok, or releases it when how is "release".
func (s *suite) finish(t *testing.T, st store.Store, key string, tok store.Token, how string) {
	t.Helper()
	var err error
	if how == "release" {
		err = st.Release(ctx, key, tok)
	} else {
		_, err = st.Complete(ctx, key, tok, store.Record{}, s.long())
	}
	if err != nil {
		t.Fatal(err)
	}
}
