package pgstore_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
)

// TestClaimSettlesOnAChurningKey: claims of one key that others claim and
// release over and over (a lock-like key) each get an answer; none fails
// because the row kept changing under its statement.
func TestClaimSettlesOnAChurningKey(t *testing.T) {
	s := newStore(t, sharedPool(t), pgstore.Options{})
	var seq, claimed atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(4 * time.Second)
	if testing.Short() {
		stop = time.Now().Add(time.Second)
	}
	for g := range 24 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				r, err := s.Claim(bg, "churn", store.ClaimRequest{Owner: fmt.Sprint("o", seq.Add(1)),
					Lease: time.Minute, TTL: time.Hour, Waiter: fmt.Sprint("w", g)})
				if err != nil {
					t.Error(err)
					return
				}
				if r.Status == store.Claimed {
					claimed.Add(1)
					if err := s.Release(bg, "churn", r.Token); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if claimed.Load() == 0 {
		t.Fatal("no claim got the key")
	}
}
