package redisstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// takeoverAfter claims key for A, lets renew run (A renewing as a live
// holder would), then waits out A's lease, as if A died, and returns A's
// claim and the next claim, B's.
func takeoverAfter(t *testing.T, st store.Store, key string, lease, ttl time.Duration, renew func(store.Token)) (a, b store.ClaimResult) {
	t.Helper()
	a, err := st.Claim(bg, key, store.ClaimRequest{Owner: "A-" + key, Lease: lease, TTL: ttl})
	if err != nil || a.Status != store.Claimed {
		t.Fatalf("%s: A's claim: %+v, %v", key, a, err)
	}
	if renew != nil {
		renew(a.Token)
	}
	time.Sleep(lease + 50*time.Millisecond)
	b, err = st.Claim(bg, key, store.ClaimRequest{Owner: "B-" + key, Lease: lease, TTL: ttl})
	if err != nil {
		t.Fatalf("%s: B's claim: %v", key, err)
	}
	return a, b
}

// A holder that dies is taken over (a larger fence, attempt 2), as
// memstore does, when the lease is as long as the TTL or longer: the
// record in progress outlives the lease by the TTL. It used to live
// max(lease, TTL), so it was gone when the lease ended and the next claim
// repeated fence 1 as a fresh claim, a fence the dead holder held too.
func TestTakeoverWhenLeaseOutlastsTTL(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	stores := map[string]store.Store{"redis": newStore(t, newClient(t, srv)), "mem": memstore.New(memstore.Options{})}
	for name, st := range stores {
		for _, lt := range [][2]time.Duration{{300 * time.Millisecond, 300 * time.Millisecond}, {500 * time.Millisecond, 300 * time.Millisecond}} {
			key := fmt.Sprintf("%s-%v-%v", name, lt[0], lt[1])
			a, b := takeoverAfter(t, st, key, lt[0], lt[1], nil)
			if b.Status != store.Claimed || b.Token.Fence <= a.Token.Fence || !b.Takeover || b.Attempt != 2 {
				t.Errorf("%s: lease %v, TTL %v: after A (fence %d) died, B got %v fence %d takeover %v attempt %d; want claimed, a larger fence, a takeover, attempt 2",
					name, lt[0], lt[1], a.Token.Fence, b.Status, b.Token.Fence, b.Takeover, b.Attempt)
			}
		}
	}
}

// A holder that renews for longer than TTL − lease and then dies is taken
// over with a larger fence: a renewal keeps the record outliving the new
// lease by the TTL. It used to keep it only the lease.
func TestTakeoverAfterRenewalsPastTTL(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	s := newStore(t, newClient(t, srv))
	lease, ttl := 200*time.Millisecond, 300*time.Millisecond
	a, b := takeoverAfter(t, s, "k", lease, ttl, func(tok store.Token) {
		for range 4 {
			time.Sleep(lease / 2)
			if err := s.Renew(bg, "k", tok, lease); err != nil {
				t.Fatal(err)
			}
		}
	})
	if b.Status != store.Claimed || b.Token.Fence <= a.Token.Fence || !b.Takeover || b.Attempt != 2 {
		t.Errorf("after A (fence %d) renewed past the TTL and died, B got %v fence %d takeover %v attempt %d; want claimed, a larger fence, a takeover, attempt 2",
			a.Token.Fence, b.Status, b.Token.Fence, b.Takeover, b.Attempt)
	}
}
