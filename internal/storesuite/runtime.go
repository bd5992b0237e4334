package storesuite

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

var bg = context.Background()

// Storm checks a storm on one runtime over s: one execution, everyone
// gets it.
func Storm(t *testing.T, s store.Store) {
	rt := idemtest.Runtime(t, idem.Options{Store: s})
	g := idemtest.NewGate()
	var chans []<-chan idemtest.Result
	for range 100 {
		chans = append(chans, idemtest.GoDo(bg, rt, "storm", g.Fn("once", nil)))
	}
	<-g.Started
	idemtest.Eventually(t, "parked callers", func() bool { return rt.Stats().Waiters == 99 })
	close(g.Open)
	for _, ch := range chans {
		if r := idemtest.Recv(t, ch); r.Err != nil || r.V != "once" {
			t.Fatalf("caller: %+v", r)
		}
	}
	if g.Runs() != 1 {
		t.Fatalf("ran %d times", g.Runs())
	}
}

// SharedKeys checks duplicates on three instances (runtimes on stores
// from instance, with connections of their own, as separate processes
// have) over overlapping keys: every key runs once. Every store instance
// returns must see the same keys.
func SharedKeys(t *testing.T, instance func(t testing.TB) store.Store) {
	var rts []*idem.Runtime
	for range 3 {
		rts = append(rts, idemtest.Runtime(t, idem.Options{Store: instance(t), Shards: 2}))
	}
	const keys = 200
	var runs [keys]atomic.Int32
	var wg sync.WaitGroup
	for i, rt := range rts {
		for g := range 4 {
			wg.Go(func() {
				for k := range keys {
					k := (k + g*31 + i*17) % keys
					v, err := idem.Do(bg, rt, fmt.Sprint("key-", k), func(context.Context) (int, error) {
						runs[k].Add(1)
						time.Sleep(time.Millisecond)
						return k, nil
					})
					if err != nil || v != k {
						t.Errorf("key %d: %v %v", k, v, err)
					}
				}
			})
		}
	}
	wg.Wait()
	for k := range runs {
		if n := runs[k].Load(); n != 1 {
			t.Fatalf("key %d ran %d times", k, n)
		}
	}
}
