package idem_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
)

// stormCall calls key with fn and reports whether the call joined a run in
// flight (the callers whose settle time counts).
type stormCall func(key string, fn chargeFunc) (joined bool, err error)

// BenchmarkStormSettle is the harness's storm (bench/, scenario storm) in
// go test form, for profiles and traces: each op releases 1,000 callers at
// once on a new key whose function takes 5ms, and reports the settle time
// of the callers that joined the run (from the function's return to the
// caller's return), as percentiles over all storms.
func BenchmarkStormSettle(b *testing.B) {
	systems := []struct {
		name  string
		start func(b *testing.B) stormCall
	}{
		{"idem", func(b *testing.B) stormCall {
			rt := idemtest.Runtime(b, idem.Options{Policy: idem.Policy{Settle: 3 * time.Second}})
			return func(key string, fn chargeFunc) (bool, error) {
				var out idem.Outcome
				_, err := idem.Do(bg, rt, key, fn, idem.WithOutcome(&out))
				return out == idem.Joined, err
			}
		}},
		{"singleflight+lru", func(*testing.B) stormCall {
			h := newHandMade(nil)
			return func(key string, fn chargeFunc) (bool, error) {
				if _, ok := h.lru.Get(key); ok {
					return false, nil
				}
				ran := false
				_, err, _ := h.g.Do(key, func() (any, error) {
					ran = true
					r, err := fn(bg)
					h.lru.Add(key, r)
					return r, err
				})
				return !ran, err
			}
		}},
	}
	for _, sys := range systems {
		b.Run(sys.name, func(b *testing.B) { stormSettle(b, sys.start(b)) })
	}
}

func stormSettle(b *testing.B, call stormCall) {
	const callers = 1000
	var doneAt, execs atomic.Int64
	slow := func(context.Context) (receipt, error) {
		execs.Add(1)
		time.Sleep(5 * time.Millisecond)
		doneAt.Store(time.Now().UnixNano())
		return receipt{ID: "r-1", Amount: 4200}, nil
	}
	settles := make([]time.Duration, 0, b.N*callers)
	var mu sync.Mutex
	b.ReportAllocs()
	for b.Loop() {
		key := "storm-" + strconv.FormatInt(keySeq.Add(1), 10)
		release := make(chan struct{})
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				<-release
				joined, err := call(key, slow)
				if err != nil {
					b.Error(err)
				}
				end := time.Now().UnixNano()
				if joined {
					mu.Lock()
					settles = append(settles, time.Duration(end-doneAt.Load()))
					mu.Unlock()
				}
			})
		}
		close(release)
		wg.Wait()
		if n := execs.Swap(0); n != 1 {
			b.Errorf("%d executions", n)
		}
	}
	reportSettles(b, settles)
}

func reportSettles(b *testing.B, settles []time.Duration) {
	if len(settles) == 0 {
		return
	}
	slices.Sort(settles)
	at := func(q float64) float64 { return float64(settles[int(q*float64(len(settles)-1))].Microseconds()) }
	b.ReportMetric(at(0), "settle-min-µs")
	b.ReportMetric(at(0.5), "settle-p50-µs")
	b.ReportMetric(at(0.99), "settle-p99-µs")
}
