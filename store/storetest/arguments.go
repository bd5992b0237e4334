package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

func (s *suite) invalidArguments(t *testing.T) {
	st := s.h.New(t)
	for _, lease := range []time.Duration{0, -time.Second} {
		_, err := st.Claim(ctx, "k", store.ClaimRequest{Owner: "o", Lease: lease, TTL: s.long()})
		wantErr(t, fmt.Sprintf("Claim with lease %v", lease), err, store.ErrInvalidArgument)
		_, err = st.Claim(ctx, "k", store.ClaimRequest{Owner: "o", Lease: s.long(), TTL: lease})
		wantErr(t, fmt.Sprintf("Claim with ttl %v", lease), err, store.ErrInvalidArgument)
	}
	for _, d := range []time.Duration{store.MaxDuration + 1, 1<<63 - 1} {
		_, err := st.Claim(ctx, "k", store.ClaimRequest{Owner: "o", Lease: s.long(), TTL: d})
		wantErr(t, fmt.Sprintf("Claim with ttl %v", d), err, store.ErrInvalidArgument)
		_, err = st.Claim(ctx, "k", store.ClaimRequest{Owner: "o", Lease: d, TTL: s.long()})
		wantErr(t, fmt.Sprintf("Claim with lease %v", d), err, store.ErrInvalidArgument)
	}
	_, err := st.Claim(ctx, "k", store.ClaimRequest{Lease: s.long(), TTL: s.long()})
	wantErr(t, "Claim without an owner", err, store.ErrInvalidArgument)
	tok := s.mustClaim(t, st, "k", "o", s.long())
	_, err = st.Complete(ctx, "k", tok, store.Record{}, 0)
	wantErr(t, "Complete with ttl 0", err, store.ErrInvalidArgument)
	wantErr(t, "Renew with lease 0", st.Renew(ctx, "k", tok, 0), store.ErrInvalidArgument)
	wantErr(t, "Renew past MaxDuration", st.Renew(ctx, "k", tok, store.MaxDuration+1), store.ErrInvalidArgument)
	_, err = st.Complete(ctx, "k", tok, store.Record{}, store.MaxDuration+1)
	wantErr(t, "Complete past MaxDuration", err, store.ErrInvalidArgument)
	for _, key := range []string{"", "a\x00b", strings.Repeat("x", store.MaxKeyLen+1)} {
		_, err := st.Claim(ctx, key, store.ClaimRequest{Owner: "o", Lease: s.long(), TTL: s.long()})
		wantErr(t, fmt.Sprintf("Claim(%.20q)", key), err, store.ErrInvalidKey)
		_, err = st.Get(ctx, key)
		wantErr(t, fmt.Sprintf("Get(%.20q)", key), err, store.ErrInvalidKey)
	}
	// Nothing above may have touched the key.
	if res := s.claim(t, st, "k", "o", s.long(), nil); res.Status != store.Claimed || res.Token != tok {
		t.Fatalf("key changed by rejected calls: %v %+v", res.Status, res.Token)
	}
}

// The longest lease and TTL work like any other: no overflow makes a claim
// born expired.
func (s *suite) longestDurations(t *testing.T) {
	st := s.h.New(t)
	first, err := st.Claim(ctx, "k", store.ClaimRequest{Owner: "a", Lease: store.MaxDuration, TTL: store.MaxDuration})
	if err != nil || first.Status != store.Claimed {
		t.Fatalf("claim with the longest lease and TTL: %v %v", first.Status, err)
	}
	second := s.claim(t, st, "k", "b", s.long(), nil)
	if second.Status != store.InProgress {
		t.Fatalf("second claim: %v, want in-progress", second.Status)
	}
	rec, err := st.Complete(ctx, "k", first.Token, store.Record{Value: []byte("v")}, store.MaxDuration)
	if err != nil || !rec.ExpiresAt.After(time.Now().Add(99*365*24*time.Hour)) {
		t.Fatalf("complete with the longest TTL: %+v %v", rec, err)
	}
}

func (s *suite) oddKeys(t *testing.T) {
	st := s.h.New(t)
	keys := []string{"a:b", "a", "a:b:", "{tag}", "}{", "ключ", "emoji-🔑", "sp ace", "new\nline",
		"\xff\xfe", strings.Repeat("k", store.MaxKeyLen), store.BuildKey("1", store.Scope{Namespace: "a:b"}),
		store.BuildKey("b:1", store.Scope{Namespace: "a"})}
	toks := make([]store.Token, len(keys))
	for i, k := range keys {
		toks[i] = s.mustClaim(t, st, k, "o", s.long())
	}
	for i, k := range keys {
		if _, err := st.Complete(ctx, k, toks[i], store.Record{Value: []byte(k)}, s.long()); err != nil {
			t.Fatalf("Complete(%.30q): %v", k, err)
		}
	}
	for _, k := range keys {
		got, err := st.Get(ctx, k)
		if err != nil || string(got.Value) != k {
			t.Fatalf("Get(%.30q) = %.30q, %v: keys collided or were mangled", k, got.Value, err)
		}
	}
}
