package pgstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
)

// A holder that dies is taken over (Takeover, attempt 2, a larger fence)
// whatever its lease and TTL: its row lives the lease and then the TTL, and
// a renewal keeps that margin. The row used to live the longer of lease
// and TTL, so with a lease as long as the TTL, or renewals past the TTL,
// it ended with the lease and the next claim counted as a new record.
func TestTakeoverWhateverLeaseAndTTL(t *testing.T) {
	t.Parallel()
	s := newStore(t, sharedPool(t), pgstore.Options{})
	for _, c := range []struct {
		lease, ttl time.Duration
		renewals   int
	}{
		{300 * time.Millisecond, 300 * time.Millisecond, 0},
		{500 * time.Millisecond, 300 * time.Millisecond, 0},
		{200 * time.Millisecond, 300 * time.Millisecond, 4},
	} {
		key := fmt.Sprintf("k-%v-%v-%d", c.lease, c.ttl, c.renewals)
		a, err := s.Claim(bg, key, store.ClaimRequest{Owner: "A", Lease: c.lease, TTL: c.ttl})
		if err != nil || a.Status != store.Claimed {
			t.Fatalf("%s: A's claim: %+v, %v", key, a, err)
		}
		for range c.renewals {
			time.Sleep(c.lease / 2)
			if err := s.Renew(bg, key, a.Token, c.lease); err != nil {
				t.Fatalf("%s: renew: %v", key, err)
			}
		}
		time.Sleep(c.lease + 50*time.Millisecond)
		b, err := s.Claim(bg, key, store.ClaimRequest{Owner: "B", Lease: c.lease, TTL: c.ttl})
		if err != nil || b.Status != store.Claimed || !b.Takeover || b.Attempt != 2 || b.Token.Fence <= a.Token.Fence {
			t.Errorf("%s: after A (fence %d) died, B got %+v, %v; want a takeover, attempt 2, a larger fence", key, a.Token.Fence, b, err)
		}
	}
}
