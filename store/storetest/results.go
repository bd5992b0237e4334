package storetest

import (
	"fmt"
	"testing"

	"github.com/idemrt/idem/store"
)

func (s *suite) recordRoundTrip(t *testing.T) {
	st := s.h.New(t)
	fp := []byte("sha256:\x00\x01\xfe\xff:{}")
	value := make([]byte, 300)
	for i := range value {
		value[i] = byte(i)
	}
	tok := s.claim(t, st, "k", "owner-1", s.long(), fp).Token
	rec, err := st.Complete(ctx, "k", tok, store.Record{Value: value, Fingerprint: fp}, s.long())
	if err != nil {
		t.Fatal(err)
	}
	want := store.Record{Value: value, Fingerprint: fp, Token: tok}
	s.checkRecord(t, "Complete", rec, want, s.long())
	res := s.claim(t, st, "k", "owner-2", s.long(), fp)
	if res.Status != store.Completed {
		t.Fatalf("claim of a completed key = %v", res.Status)
	}
	s.checkRecord(t, "Claim", res.Record, want, s.long())
	got, err := st.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	s.checkRecord(t, "Get", got, want, s.long())
	value[0] = 99 // the store must have kept its own copy
	got, _ = st.Get(ctx, "k")
	if got.Value[0] != 0 {
		t.Fatal("the store kept the caller's slice instead of a copy")
	}
}

func (s *suite) permanentErrorRoundTrip(t *testing.T) {
	st := s.h.New(t)
	tok := s.claim(t, st, "k", "owner-1", s.long(), []byte("fp")).Token
	in := store.Record{Failed: true, Error: "card declined: insufficient funds (code 51)", Fingerprint: []byte("fp")}
	if _, err := st.Complete(ctx, "k", tok, in, s.long()); err != nil {
		t.Fatal(err)
	}
	in.Token = tok
	res := s.claim(t, st, "k", "owner-2", s.long(), nil)
	if res.Status != store.Completed {
		t.Fatalf("claim of a key with a stored error = %v", res.Status)
	}
	s.checkRecord(t, "Claim", res.Record, in, s.long())
	tok2 := s.mustClaim(t, st, "empty", "owner-1", s.long())
	if _, err := st.Complete(ctx, "empty", tok2, store.Record{}, s.long()); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, "empty")
	if err != nil || len(got.Value) != 0 || got.Failed {
		t.Fatalf("empty value round trip: %+v, %v", got, err)
	}
}

func (s *suite) completeReplay(t *testing.T) {
	st := s.h.New(t)
	tok := s.mustClaim(t, st, "k", "owner-1", s.long())
	first, err := st.Complete(ctx, "k", tok, store.Record{Value: []byte("v1")}, s.long())
	if err != nil {
		t.Fatal(err)
	}
	again, err := st.Complete(ctx, "k", tok, store.Record{Value: []byte("v2")}, s.long())
	if err != nil {
		t.Fatalf("replayed Complete: %v", err)
	}
	if string(again.Value) != "v1" || again.Token != first.Token {
		t.Fatalf("replayed Complete returned %q, want the stored v1", again.Value)
	}
}

func (s *suite) resultTTL(t *testing.T) {
	st := s.h.New(t)
	var tok store.Token
	key := s.whileLive(t, func(key string) error {
		tok = s.mustClaim(t, st, key, "owner-1", s.long())
		if _, err := st.Complete(ctx, key, tok, store.Record{Value: []byte("v")}, s.short()); err != nil {
			t.Fatal(err)
		}
		if res := s.claim(t, st, key, "owner-2", s.long(), nil); res.Status != store.Completed {
			return fmt.Errorf("claim before the TTL = %v, want completed", res.Status)
		}
		return nil
	})
	s.expire(t)
	_, err := st.Get(ctx, key)
	wantErr(t, "Get after the TTL", err, store.ErrNotFound)
	res := s.claim(t, st, key, "owner-3", s.long(), nil)
	if res.Status != store.Claimed {
		t.Fatalf("claim after the TTL = %v, want claimed", res.Status)
	}
	if res.Token == tok {
		t.Fatal("a new claim reused the old token")
	}
}

func (s *suite) getAndForget(t *testing.T) {
	st := s.h.New(t)
	_, err := st.Get(ctx, "k")
	wantErr(t, "Get of an absent key", err, store.ErrNotFound)
	if err := st.Forget(ctx, "k"); err != nil {
		t.Fatalf("Forget of an absent key: %v", err)
	}
	tok := s.mustClaim(t, st, "k", "owner-1", s.long())
	_, err = st.Get(ctx, "k")
	wantErr(t, "Get of a key in progress", err, store.ErrNotFound)
	wantErr(t, "Forget of a key in progress", st.Forget(ctx, "k"), store.ErrInProgress)
	if _, err := st.Complete(ctx, "k", tok, store.Record{Value: []byte("v")}, s.long()); err != nil {
		t.Fatal(err)
	}
	if err := st.Forget(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	_, err = st.Get(ctx, "k")
	wantErr(t, "Get after Forget", err, store.ErrNotFound)
	if res := s.claim(t, st, "k", "owner-2", s.long(), nil); res.Status != store.Claimed {
		t.Fatalf("claim after Forget = %v, want claimed", res.Status)
	}
}
