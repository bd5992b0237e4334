package pgstore_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
	"github.com/idemrt/idem/store/storetest"
)

// harness runs the suite on pool; every store gets a table of its own, so
// the subtests do not see each other's keys.
func harness(pool *pgxpool.Pool) storetest.Harness {
	return storetest.Harness{
		New: func(t testing.TB) store.Store {
			return newStore(t, pool, pgstore.Options{})
		},
		Advance: func(_ testing.TB, d time.Duration) { time.Sleep(d) },
		Unit:    100 * time.Millisecond,
		Seeds:   3,
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, harness(sharedPool(t)))
}
