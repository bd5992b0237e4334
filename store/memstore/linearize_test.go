package memstore_test

import (
	"testing"
	"time"

	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
	"github.com/idemrt/idem/store/storetest"
)

// Concurrent histories on the real clock, every lease and TTL longer than
// the history, checked for linearizability.
func TestLinearizable(t *testing.T) {
	storetest.Linearizable(t, storetest.Harness{
		New: func(t testing.TB) store.Store {
			s := memstore.New(memstore.Options{})
			t.Cleanup(func() { s.Close() })
			return s
		},
		Unit: time.Second,
	}, storetest.LinearOptions{Clients: 5, Keys: 3, Ops: 60, Histories: 20})
}

// The same on a fake clock that a clock goroutine advances during the
// history: leases expire, keys are taken over and records expire, and the
// model knows the time of every call.
func TestLinearizableExpiry(t *testing.T) {
	storetest.Linearizable(t, fakeClockHarness(), storetest.LinearOptions{Clients: 5, Keys: 3, Ops: 60, Histories: 20, Ticks: 20})
}
