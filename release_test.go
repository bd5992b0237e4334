package idem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/keyshard"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// failRelease is a batched store (no store.InProcess) whose Release returns a
// store error while failing is set, without applying it.
type failRelease struct {
	store.Store
	mu      sync.Mutex
	failing bool
	fails   int
}

func (f *failRelease) Release(ctx context.Context, key string, tok store.Token) error {
	f.mu.Lock()
	failing := f.failing
	if failing {
		f.fails++
	}
	f.mu.Unlock()
	if failing {
		return errors.New("connection refused")
	}
	return f.Store.Release(ctx, key, tok)
}

func (f *failRelease) failCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fails
}

func (f *failRelease) Subscribe(ctx context.Context, fn func(string)) (string, func(), error) {
	return f.Store.(store.Waker).Subscribe(ctx, fn)
}

// A WithFailFast() caller gets ErrConflict at once while the shard retries
// the release of a failed owner's claim (the store refuses the Release; the
// shard retries while the lease lasts, 1 min here), instead of being parked
// until the release goes through.
func TestSettleZeroAnsweredWhileReleaseRetried(t *testing.T) {
	clk := idemtest.FakeClock()
	st := &failRelease{Store: memStore(clk)}
	rt := idemtest.Runtime(t, idem.Options{Store: st, Clock: clk})
	a := newStepFn(t)
	owner := idemtest.GoDo(bg, rt, "k", a.fn, idem.WithLease(time.Minute))
	started(t, a, "A")
	st.mu.Lock()
	st.failing = true
	st.mu.Unlock()
	a.ret <- stepRet{err: errTransient}
	if r := idemtest.Recv(t, owner); !errors.Is(r.Err, errTransient) {
		t.Fatalf("A: %+v", r)
	}
	idemtest.Eventually(t, "the release to fail", func() bool { return st.failCount() > 0 })

	r := idemtest.Recv(t, idemtest.GoDo(bg, rt, "k", idemtest.MustNotRun(t), idem.WithFailFast()))
	var ce *idem.ConflictError
	if !errors.As(r.Err, &ce) || ce.LeaseLeft <= 0 {
		t.Fatalf("a WithFailFast() caller while the release is retried: %+v, want a *ConflictError with the lease left", r)
	}
	st.mu.Lock()
	st.failing = false
	st.mu.Unlock()
	clk.Advance(time.Second) // the retried release goes through
	if v, err := idem.Do(bg, rt, "k", idemtest.Value("after"), idem.WithSettle(time.Hour)); err != nil || v != "after" {
		t.Fatalf("after the release: %q %v", v, err)
	}
}

// sameMemShard returns n keys that fall in one memstore shard (64 of them,
// by keyshard.Hash).
func sameMemShard(n int) []string {
	var keys []string
	want := keyshard.Hash("k0") % 64
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprint("k", i)
		if keyshard.Hash(k)%64 == want {
			keys = append(keys, k)
		}
	}
	return keys
}

// An owner whose lease the runtime renews, running longer than claim +
// lease + TTL, is not taken for an abandoned claim: a full in-memory store
// evicts something else, and a second runtime does not run the key while
// the first still holds it (it once did, and the first owner's result was
// refused).
func TestRenewedOwnerNotEvicted(t *testing.T) {
	clk := idemtest.FakeClock()
	mem := memstore.New(memstore.Options{Clock: clk, MaxRecords: 64}) // one record per store shard
	rt1 := idemtest.Runtime(t, idem.Options{Store: mem, Clock: clk})
	rt2 := idemtest.Runtime(t, idem.Options{Store: mem, Clock: clk})
	keys := sameMemShard(2)
	opts := []idem.CallOption{idem.WithLease(3 * time.Second), idem.WithTTL(1500 * time.Millisecond)}
	a := newStepFn(t)
	owner := idemtest.GoDo(bg, rt1, keys[0], a.fn, opts...)
	started(t, a, "A")
	// The shard arms the first renewal just after it grants the key: moving
	// the clock before that would skip it for good.
	idemtest.Eventually(t, "the first renewal armed", func() bool { return clk.Timers() == 1 })
	for i := range 4 { // renewals at 1, 2, 3 and 4 s: the lease runs to 7 s
		ops := rt1.Stats().Ops
		// The renewal went out; one re-armed after the Advance fires at once.
		idemtest.AdvanceUntil(t, clk, time.Second, fmt.Sprint("renewal ", i+1), func() bool { return rt1.Stats().Ops > ops && clk.Timers() == 1 })
	}
	clk.Advance(600 * time.Millisecond) // 4.6 s: past claim + lease + TTL (4.5 s), lease live to 7 s
	if _, err := idem.Do(bg, rt2, keys[1], idemtest.Value("other"), opts...); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	_, err := idem.Do(bg, rt2, keys[0], func(context.Context) (string, error) {
		runs.Add(1)
		return "B", nil
	}, append(opts, idem.WithFailFast())...)
	if runs.Load() != 0 {
		t.Errorf("a second runtime ran %s while its first owner held a live, renewed lease (evicted %d); its answer: %v", keys[0], mem.Evicted(), err)
	}
	a.ret <- stepRet{v: "A"}
	if r := idemtest.Recv(t, owner); r.Err != nil {
		t.Errorf("A, renewed all along: %v", r.Err)
	}
}
