package storetest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/idemrt/idem/store"
)

func (s *suite) claimAbsent(t *testing.T) {
	st := s.h.New(t)
	res := s.claim(t, st, "k", "owner-1", s.long(), []byte("fp"))
	if res.Status != store.Claimed || res.Takeover {
		t.Fatalf("status %v takeover %v, want claimed, no takeover", res.Status, res.Takeover)
	}
	if res.Token.Fence == 0 || res.Token.Owner != "owner-1" {
		t.Fatalf("token %+v: want a positive fence and owner-1", res.Token)
	}
	if res.LeaseLeft <= 0 || res.LeaseLeft > s.long() {
		t.Fatalf("lease left %v, want in (0, %v]", res.LeaseLeft, s.long())
	}
}

func (s *suite) claimReplay(t *testing.T) {
	st := s.h.New(t)
	first := s.mustClaim(t, st, "k", "owner-1", s.long())
	again := s.claim(t, st, "k", "owner-1", s.long(), nil)
	if again.Status != store.Claimed || again.Token != first {
		t.Fatalf("replayed claim = %v %+v, want claimed with %+v", again.Status, again.Token, first)
	}
}

func (s *suite) claimInProgress(t *testing.T) {
	st := s.h.New(t)
	tok := s.claim(t, st, "k", "owner-1", s.long(), []byte("fp-\x00\xff")).Token
	res := s.claim(t, st, "k", "owner-2", s.long(), []byte("other"))
	if res.Status != store.InProgress {
		t.Fatalf("second claim = %v, want in-progress", res.Status)
	}
	if res.LeaseLeft <= 0 || res.LeaseLeft > s.long() {
		t.Fatalf("lease left %v, want in (0, %v]", res.LeaseLeft, s.long())
	}
	if !bytes.Equal(res.Fingerprint, []byte("fp-\x00\xff")) {
		t.Fatalf("holder fingerprint %q, want the owner's", res.Fingerprint)
	}
	if res.Token.Fence != tok.Fence {
		t.Fatalf("holder fence %d, want %d", res.Token.Fence, tok.Fence)
	}
}

func (s *suite) concurrentClaims(t *testing.T) {
	st := s.h.New(t)
	const n = 32
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[store.Status]int{}
	errs := 0
	for i := range n {
		wg.Go(func() {
			res, err := st.Claim(ctx, "hot", store.ClaimRequest{Owner: fmt.Sprint("owner-", i), Lease: s.long(), TTL: s.long()})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs++
				return
			}
			counts[res.Status]++
		})
	}
	wg.Wait()
	if errs > 0 || counts[store.Claimed] != 1 || counts[store.InProgress] != n-1 {
		t.Fatalf("%d concurrent claims: %v, %d errors; want exactly one claimed", n, counts, errs)
	}
}
