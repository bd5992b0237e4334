package storetest_test

import (
	"testing"
	"time"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
	"github.com/idemrt/idem/store/storetest"
)

// A store's own test runs the suite with a harness that makes a store and
// moves its clock.
func ExampleRun() {
	_ = func(t *testing.T) {
		clocks := map[testing.TB]*clock.Fake{}
		storetest.Run(t, storetest.Harness{
			New: func(t testing.TB) store.Store {
				clocks[t] = clock.NewFake(time.Unix(0, 0))
				return memstore.New(memstore.Options{Clock: clocks[t]})
			},
			Advance: func(t testing.TB, d time.Duration) { clocks[t].Advance(d) },
			Unit:    time.Second,
			Exact:   true,
		})
	}
}
