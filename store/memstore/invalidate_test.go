package memstore_test

import (
	"testing"

	"github.com/idemrt/idem/internal/storesuite"
	"github.com/idemrt/idem/store/memstore"
)

// Two runtimes share one Store: a Forget or a Clear on one reaches the
// other's cache; see storesuite.Invalidate.
func TestInvalidate(t *testing.T) {
	s := memstore.New(memstore.Options{})
	defer s.Close()
	storesuite.Invalidate(t, s, s)
}

// A read of the store that comes back after the invalidation caches
// nothing; see storesuite.InvalidateRace.
func TestInvalidateRace(t *testing.T) {
	s := memstore.New(memstore.Options{})
	defer s.Close()
	storesuite.InvalidateRace(t, s, s)
}
