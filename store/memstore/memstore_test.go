package memstore_test

import (
	"testing"
	"time"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
	"github.com/idemrt/idem/store/storetest"
)

func TestConformance(t *testing.T) {
	var clocks = map[testing.TB]*clock.Fake{}
	storetest.Run(t, storetest.Harness{
		New: func(t testing.TB) store.Store {
			c := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			clocks[t] = c
			s := memstore.New(memstore.Options{Clock: c})
			t.Cleanup(func() { s.Close() })
			return s
		},
		Advance: func(t testing.TB, d time.Duration) { clocks[t].Advance(d) },
		Unit:    time.Second,
		Exact:   true,
		Seeds:   20,
	})
}
