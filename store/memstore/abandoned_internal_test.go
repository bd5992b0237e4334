package memstore

import (
	"context"
	"testing"
	"time"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
)

// A claim its owner renews every third of its lease, with a result TTL
// shorter than the lease, never enters the abandoned list (it once gained an
// entry per lease + TTL for as long as the owner ran).
func TestAbandonedListSkipsRenewedClaim(t *testing.T) {
	c := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := New(Options{Clock: c})
	ctx := context.Background()
	const lease, ttl = 3 * time.Second, time.Second
	a, err := s.Claim(ctx, "k", store.ClaimRequest{Owner: "a", Lease: lease, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	for range 3000 { // 1000 s of renewals, one every 1/3 s
		c.Advance(time.Second / 3)
		if err := s.Renew(ctx, "k", a.Token, lease); err != nil {
			t.Fatal(err)
		}
	}
	sh := s.shardOf("k")
	sh.mu.Lock()
	n := len(sh.abandoned)
	sh.mu.Unlock()
	if n > 0 {
		t.Errorf("a claim renewed every 1/3 s for 1000 s has %d entries in the abandoned list; want 0 (it never outlived its lease)", n)
	}
}
