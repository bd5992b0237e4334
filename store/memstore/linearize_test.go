package memstore_test

import (
	"sync"
	"testing"
	"time"

	"github.com/idemrt/idem/clock"
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
	var mu sync.Mutex
	clocks := map[testing.TB]*clock.Fake{}
	storetest.Linearizable(t, storetest.Harness{
		New: func(t testing.TB) store.Store {
			c := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			mu.Lock()
			clocks[t] = c
			mu.Unlock()
			s := memstore.New(memstore.Options{Clock: c})
			t.Cleanup(func() { s.Close() })
			return s
		},
		Advance: func(t testing.TB, d time.Duration) {
			mu.Lock()
			c := clocks[t]
			mu.Unlock()
			c.Advance(d)
		},
		Unit:  time.Second,
		Exact: true,
	}, storetest.LinearOptions{Clients: 5, Keys: 3, Ops: 60, Histories: 20, Ticks: 20})
}
