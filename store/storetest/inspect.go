package storetest

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/idemrt/idem/store"
)

// inspector returns st as a store.Inspector, or skips the test.
func inspector(t *testing.T, st store.Store) store.Inspector {
	t.Helper()
	in, ok := st.(store.Inspector)
	if !ok {
		t.Skip("the store does not implement store.Inspector")
	}
	return in
}

func (s *suite) inspect(t *testing.T, in store.Inspector, key string) store.Entry {
	t.Helper()
	e, err := in.Inspect(ctx, key)
	if err != nil {
		t.Fatalf("Inspect(%q): %v", key, err)
	}
	return e
}

func (s *suite) wantAbsent(t *testing.T, in store.Inspector, key, when string) {
	t.Helper()
	if e := s.inspect(t, in, key); e.State != store.Absent || !e.Token.IsZero() || e.LeaseLeft != 0 {
		t.Fatalf("Inspect %s = %+v, want absent", when, e)
	}
}

// Inspect of an absent key, of a key held (with its lease live, then
// ended), taken over, completed and failed permanently, and again once it
// is released, forgotten or expired. Inspect changes nothing.
func (s *suite) inspectStates(t *testing.T) {
	st := s.h.New(t)
	in := inspector(t, st)
	s.wantAbsent(t, in, "k", "of a key never claimed")
	fp := []byte("fp\x00\xff")
	res := s.claim(t, st, "k", "owner-1", s.long(), fp)
	if res.Status != store.Claimed || res.Takeover {
		t.Fatalf("claim after Inspect of an absent key = %v takeover=%v: Inspect changed it", res.Status, res.Takeover)
	}
	e := s.inspect(t, in, "k")
	if e.State != store.Held || e.Token != res.Token || !bytes.Equal(e.Fingerprint, fp) {
		t.Fatalf("Inspect of a held key = %+v, want held by %+v with fingerprint %q", e, res.Token, fp)
	}
	if e.LeaseLeft <= 0 || e.LeaseLeft > s.long() || (s.h.Exact && e.LeaseLeft != s.long()) {
		t.Fatalf("Inspect of a held key: lease left %v, want within (0, %v]", e.LeaseLeft, s.long())
	}
	if dup := s.claim(t, st, "k", "owner-2", s.long(), nil); dup.Status != store.InProgress || dup.Token.Fence != res.Token.Fence {
		t.Fatalf("claim after Inspect of a held key = %v fence %d: Inspect changed it", dup.Status, dup.Token.Fence)
	}

	rec := store.Record{Value: []byte("value\x00\xff"), Fingerprint: fp}
	if _, err := st.Complete(ctx, "k", res.Token, rec, s.long()); err != nil {
		t.Fatal(err)
	}
	rec.Token = res.Token
	e = s.inspect(t, in, "k")
	if e.State != store.Done || e.Token != res.Token || e.LeaseLeft != 0 {
		t.Fatalf("Inspect of a completed key = %+v, want done with token %+v", e, res.Token)
	}
	s.checkRecord(t, "Inspect of a completed key", e.Record, rec, s.long())

	tok := s.mustClaim(t, st, "failed", "owner-1", s.long())
	failed := store.Record{Failed: true, Error: "card declined", Fingerprint: fp}
	if _, err := st.Complete(ctx, "failed", tok, failed, s.long()); err != nil {
		t.Fatal(err)
	}
	failed.Token = tok
	e = s.inspect(t, in, "failed")
	if e.State != store.Done || !e.Record.Failed {
		t.Fatalf("Inspect of a failed key = %+v, want done and failed", e)
	}
	s.checkRecord(t, "Inspect of a failed key", e.Record, failed, s.long())

	if err := st.Forget(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	s.wantAbsent(t, in, "k", "after Forget")
	tok = s.mustClaim(t, st, "released", "owner-1", s.long())
	if err := st.Release(ctx, "released", tok); err != nil {
		t.Fatal(err)
	}
	s.wantAbsent(t, in, "released", "after Release")
}

// A lease that ended leaves the key held, with no lease left, until a claim
// takes it over; a result whose TTL ended leaves the key absent.
func (s *suite) inspectExpiry(t *testing.T) {
	st := s.h.New(t)
	in := inspector(t, st)
	old := s.mustClaim(t, st, "k", "owner-1", s.short())
	tok := s.mustClaim(t, st, "done", "owner-1", s.long())
	if _, err := st.Complete(ctx, "done", tok, store.Record{Value: []byte("v")}, s.short()); err != nil {
		t.Fatal(err)
	}
	s.expire(t)
	if e := s.inspect(t, in, "k"); e.State != store.Held || e.Token != old || e.LeaseLeft != 0 {
		t.Fatalf("Inspect after the lease ended = %+v, want held by %+v with no lease left", e, old)
	}
	s.wantAbsent(t, in, "done", "after the result's TTL")
	cur := s.claim(t, st, "k", "owner-2", s.long(), nil)
	if cur.Status != store.Claimed || !cur.Takeover {
		t.Fatalf("claim after the lease = %v takeover=%v", cur.Status, cur.Takeover)
	}
	if e := s.inspect(t, in, "k"); e.State != store.Held || e.Token != cur.Token || e.Token.Fence <= old.Fence {
		t.Fatalf("Inspect after a takeover = %+v, want held by %+v", e, cur.Token)
	}
}

func (s *suite) inspectOddKeys(t *testing.T) {
	st := s.h.New(t)
	in := inspector(t, st)
	for _, key := range []string{"", "a\x00b", strings.Repeat("x", store.MaxKeyLen+1)} {
		_, err := in.Inspect(ctx, key)
		wantErr(t, fmt.Sprintf("Inspect(%.20q)", key), err, store.ErrInvalidKey)
	}
	for i, key := range oddKeys {
		tok := s.mustClaim(t, st, key, "o", s.long())
		if i%2 == 0 {
			if _, err := st.Complete(ctx, key, tok, store.Record{Value: []byte(key)}, s.long()); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, key := range oddKeys {
		e := s.inspect(t, in, key)
		if i%2 == 0 && (e.State != store.Done || string(e.Record.Value) != key) {
			t.Fatalf("Inspect(%.30q) = %v %.30q, want completed with the key as value", key, e.State, e.Record.Value)
		}
		if i%2 == 1 && e.State != store.Held {
			t.Fatalf("Inspect(%.30q) = %v, want in progress", key, e.State)
		}
	}
}
