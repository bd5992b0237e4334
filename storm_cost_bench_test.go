package idem_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
)

// BenchmarkStormCost is the storm of BenchmarkStormSettle without its fixed
// 5ms run: each op releases 1,000 new goroutines on one new key, and the
// owner's function returns as soon as the other 999 are parked on it. An
// op is then all CPU: the callers' arrival (where each new goroutine grows
// its stack inside Do) and their settle. It reports that cost per caller,
// averaged over every caller rather than read off a tail percentile, so
// that two builds of the storm's path can be told apart on a noisy machine
// (run the two test binaries alternately).
func BenchmarkStormCost(b *testing.B) {
	const callers = 1000
	rt := idemtest.Runtime(b, idem.Options{Policy: idem.Policy{Settle: 3 * time.Second}})
	fn := func(context.Context) (receipt, error) {
		for rt.Stats().Waiters < callers-1 {
			time.Sleep(20 * time.Microsecond)
		}
		return receipt{ID: "r-1", Amount: 4200}, nil
	}
	b.ReportAllocs()
	for b.Loop() {
		key := "cost-" + strconv.FormatInt(keySeq.Add(1), 10)
		release := make(chan struct{})
		var joined atomic.Int64
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				<-release
				var out idem.Outcome
				if _, err := idem.Do(bg, rt, key, fn, idem.WithOutcome(&out)); err != nil {
					b.Error(err)
				}
				if out == idem.Joined {
					joined.Add(1)
				}
			})
		}
		close(release)
		wg.Wait()
		if n := joined.Load(); n != callers-1 {
			b.Fatalf("%d callers joined, want %d", n, callers-1)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*callers), "ns/caller")
}
