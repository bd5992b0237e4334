package pgstore_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
)

// Benchmarks on the tests' PostgreSQL (fsync off: they measure the
// protocol and the server's CPU, not a disk; docs/postgres.md has
// figures with fsync on). Compare the sub-benchmarks of one run
// (benchstat), not runs on different machines.

var benchSeq atomic.Int64

func benchKey() string { return "order-" + strconv.FormatInt(benchSeq.Add(1), 10) }

type receipt struct {
	ID     string
	Amount int
}

func charge(context.Context) (receipt, error) { return receipt{ID: "r-1", Amount: 4200}, nil }

// BenchmarkClaimComplete: one request = claim + complete of a new key, from
// 64 concurrent callers. "idem" goes through the runtime (group commit: one
// batch, one transaction, per shard in flight); "plain" calls the store's
// operations directly, one statement per round trip, as a hand-written
// client would.
func BenchmarkClaimComplete(b *testing.B) {
	pool := poolWith(b, shared.DSN("postgres"), func(c *pgxpool.Config) { c.MaxConns = 64 })
	par := 64 / max(1, runtime.GOMAXPROCS(0)) // RunParallel runs GOMAXPROCS×par goroutines
	b.Run("idem", func(b *testing.B) {
		rt := newRuntime(b, idem.Options{Store: newStore(b, pool, pgstore.Options{})})
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
		s := newStore(b, pool, pgstore.Options{})
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

// BenchmarkCrossInstanceSettle measures how long after the owner's Do
// returns on instance A a duplicate parked on instance B is released: the
// completion's NOTIFY, B's listener, B's re-claim. B's clock is fake, so
// only the wake-up can release it.
func BenchmarkCrossInstanceSettle(b *testing.B) {
	table := newTable()
	mk := func(c clock.Clock) *idem.Runtime {
		return newRuntime(b, idem.Options{Store: instance(b, shared.DSN("postgres"), table), Clock: c})
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
