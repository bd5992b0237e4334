package pgstore_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
)

// TestScanHugeLimit: a limit is a bound, not a size to allocate: a huge
// one returns the keys there are.
func TestScanHugeLimit(t *testing.T) {
	s := newStore(t, sharedPool(t), pgstore.Options{})
	for _, k := range []string{"a", "b"} {
		if _, err := s.Claim(bg, k, store.ClaimRequest{Owner: "o", Lease: time.Minute, TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int{math.MaxInt, 1 << 40} {
		keys, next, err := s.Scan(bg, "", "", limit)
		if err != nil || next != "" || !slices.Equal(keys, []string{"a", "b"}) {
			t.Errorf("Scan limit %d = %q, %q, %v; want [a b], \"\", nil", limit, keys, next, err)
		}
	}
}
