package storesuite

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

var benchSeq atomic.Int64

func benchKey() string { return "order-" + strconv.FormatInt(benchSeq.Add(1), 10) }

type receipt struct {
	ID     string
	Amount int
}

func charge(context.Context) (receipt, error) { return receipt{ID: "r-1", Amount: 4200}, nil }

// BenchClaimComplete measures one request = claim + complete of a new key,
// from 64 concurrent callers, on stores from newStore (whose connections
// allow 64 at once). "idem" goes through the runtime (group commit: one
// batch per shard in flight); "plain" calls the store's operations
// directly, one round trip per operation, as a hand-written client would.
func BenchClaimComplete(b *testing.B, newStore func(testing.TB) store.Store) {
	par := 64 / max(1, runtime.GOMAXPROCS(0)) // RunParallel runs GOMAXPROCS×par goroutines
	b.Run("idem", func(b *testing.B) {
		rt := idemtest.Runtime(b, idem.Options{Store: newStore(b)})
		b.SetParallelism(par)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := idem.Do(bg, rt, benchKey(), charge); err != nil {
					b.Error(err)
					return
				}
			}
		})
		st := rt.Stats()
		b.ReportMetric(float64(st.Ops)/float64(st.Batches), "ops/batch")
	})
	b.Run("plain", func(b *testing.B) {
		s := newStore(b)
		val := []byte(`{"ID":"r-1","Amount":4200}`)
		var owner atomic.Int64
		b.SetParallelism(par)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				key := benchKey()
				res, err := s.Claim(bg, key, store.ClaimRequest{Owner: strconv.FormatInt(owner.Add(1), 10), Lease: time.Minute, TTL: 24 * time.Hour})
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := s.Complete(bg, key, res.Token, store.Record{Value: val}, 24*time.Hour); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchCrossInstanceSettle measures how long after the owner's Do returns
// on instance A a duplicate parked on instance B is released (the stores
// from instance see the same keys): the completion's wake-up, B's
// listener, B's re-claim. B's clock is fake, so only the wake-up can
// release it.
func BenchCrossInstanceSettle(b *testing.B, instance func(testing.TB) store.Store) {
	mk := func(c clock.Clock) *idem.Runtime {
		return idemtest.Runtime(b, idem.Options{Store: instance(b), Clock: c})
	}
	a, bRt := mk(nil), mk(clock.NewFake(time.Now()))
	var total time.Duration
	for b.Loop() {
		key := benchKey()
		started, release := make(chan struct{}), make(chan struct{})
		ownerDone := make(chan time.Time, 1)
		go func() {
			_, _ = idem.Do(bg, a, key, func(context.Context) (int, error) {
				close(started)
				<-release
				return 1, nil
			})
			ownerDone <- time.Now()
		}()
		<-started
		waiterDone := make(chan time.Time, 1)
		go func() {
			if _, err := idem.Do(bg, bRt, key, func(context.Context) (int, error) { return 2, nil }); err != nil {
				b.Error(err)
			}
			waiterDone <- time.Now()
		}()
		for bRt.Stats().Waiters == 0 {
			time.Sleep(50 * time.Microsecond)
		}
		close(release)
		tOwner, tWaiter := <-ownerDone, <-waiterDone
		total += max(0, tWaiter.Sub(tOwner))
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs-settle")
}
