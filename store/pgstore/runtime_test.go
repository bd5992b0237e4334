package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store/pgstore"
)

func newRuntime(t testing.TB, opts idem.Options) *idem.Runtime { return idemtest.Runtime(t, opts) }

func eventually(t testing.TB, what string, cond func() bool) { idemtest.Eventually(t, what, cond) }

// instance returns a store on table, on a pool of its own, as another
// process of the same service would have: instances on one table see the
// same keys.
func instance(t testing.TB, dsn, table string) *pgstore.Store {
	t.Helper()
	return newStore(t, newPool(t, dsn), pgstore.Options{Table: table})
}

// A storm on one runtime over PostgreSQL: one execution, everyone gets it.
func TestRuntimeStorm(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, idem.Options{Store: newStore(t, sharedPool(t), pgstore.Options{})})
	g := idemtest.NewGate()
	var chans []<-chan idemtest.Result
	for range 100 {
		chans = append(chans, idemtest.GoDo(bg, rt, "storm", g.Fn("once", nil)))
	}
	<-g.Started
	eventually(t, "parked callers", func() bool { return rt.Stats().Waiters == 99 })
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

// Duplicates on several instances (runtimes with pools of their own, as
// separate processes have) over overlapping keys: every key runs once.
func TestRuntimesShareATable(t *testing.T) {
	t.Parallel()
	dsn, table := shared.DSN("postgres"), newTable()
	var rts []*idem.Runtime
	for range 3 {
		rts = append(rts, newRuntime(t, idem.Options{Store: instance(t, dsn, table), Shards: 2}))
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
