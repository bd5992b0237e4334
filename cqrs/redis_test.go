package cqrs_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/cqrs"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/redisstore"
)

var prefixSeq atomic.Int64

// redisInstances starts a redis-server and returns n "service instances"
// on it: runtimes with clients of their own on one key prefix, as separate
// processes have. wrap, if set, wraps each instance's store.
func redisInstances(t *testing.T, n int, wrap func(i int, s store.Store) store.Store) []*idem.Runtime {
	t.Helper()
	srv := redistest.Start(t, redistest.Options{})
	prefix := fmt.Sprintf("cq%d:", prefixSeq.Add(1))
	var rts []*idem.Runtime
	for i := range n {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { c.Close() })
		s, err := redisstore.New(bg, c, redisstore.Options{KeyPrefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		var st store.Store = s
		if wrap != nil {
			st = wrap(i, s)
		}
		rts = append(rts, idemtest.Runtime(t, idem.Options{Store: st}))
	}
	return rts
}

// Concurrent dispatches of one command on two instances: one run, the others
// get conflicts, and both instances replay the result afterwards.
func TestRedisAcrossInstances(t *testing.T) {
	rts := redisInstances(t, 2, nil)
	o := newOrders()
	buses := []*cqrs.Bus{
		newBus(t, newIdem(t, cqrs.IdempotencyOptions{Runtime: rts[0]}), o),
		newBus(t, newIdem(t, cqrs.IdempotencyOptions{Runtime: rts[1]}), o),
	}
	ctx := reqCtx("acme", "req-1")
	release := o.Hold()
	defer release()
	owner := goPlace(ctx, buses[0], PlaceOrder{SKU: "book", Qty: 3})
	o.WaitStarted(t)
	var wg sync.WaitGroup
	var conflicts atomic.Int32
	for i := range 40 {
		wg.Go(func() {
			_, err := cqrs.Dispatch[Order](ctx, buses[i%2], PlaceOrder{SKU: "book", Qty: 3})
			if errors.Is(err, idem.ErrConflict) {
				conflicts.Add(1)
			} else {
				t.Errorf("duplicate on instance %d: %v, want a conflict", i%2, err)
			}
		})
	}
	wg.Wait()
	release()
	first := idemtest.Recv(t, owner)
	if first.err != nil {
		t.Fatal(first.err)
	}
	for _, bus := range buses { // instance 1 decodes the stored JSON
		if got, err := cqrs.Dispatch[Order](ctx, bus, PlaceOrder{SKU: "book", Qty: 3}); err != nil || got != first.o {
			t.Fatalf("replay: %+v %v, want %+v", got, err, first.o)
		}
	}
	if n := o.runs.Load(); n != 1 || conflicts.Load() != 40 {
		t.Fatalf("%d runs, %d conflicts", n, conflicts.Load())
	}

	// Tenants are isolated on Redis too; a failure on one instance lets
	// the retry on the other run.
	if _, err := cqrs.Dispatch[Order](reqCtx("globex", "req-1"), buses[1], PlaceOrder{}); err != nil {
		t.Fatal(err)
	}
	o.failNext(errors.New("gateway timeout"))
	if _, err := cqrs.Dispatch[Order](reqCtx("initech", "req-1"), buses[0], PlaceOrder{}); err == nil {
		t.Fatal("the failure did not reach the caller")
	}
	if _, err := cqrs.Dispatch[Order](reqCtx("initech", "req-1"), buses[1], PlaceOrder{}); err != nil {
		t.Fatalf("retry on the other instance: %v", err)
	}
	if n := o.runs.Load(); n != 4 {
		t.Fatalf("%d runs, want 4 (acme, globex, initech twice)", n)
	}
}

// The lock TTL on Redis with a real clock: instance A hangs (its renewals
// fail) holding the lock; instance B is refused until LockTTL has passed,
// then takes the command over.
func TestRedisLockTTLTakeover(t *testing.T) {
	rts := redisInstances(t, 2, func(i int, s store.Store) store.Store {
		if i == 0 {
			return noRenew{s}
		}
		return s
	})
	const lockTTL = 300 * time.Millisecond
	oA, oB := newOrders(), newOrders()
	busA := newBus(t, newIdem(t, cqrs.IdempotencyOptions{Runtime: rts[0], LockTTL: lockTTL}), oA)
	busB := newBus(t, newIdem(t, cqrs.IdempotencyOptions{Runtime: rts[1], LockTTL: lockTTL}), oB)
	ctx := reqCtx("", "req-1")

	release := oA.Hold()
	defer release()
	start := time.Now()
	a := goPlace(ctx, busA, PlaceOrder{SKU: "from A"})
	oA.WaitStarted(t)
	var got Order
	idemtest.Eventually(t, "B to take the command over (the lock to expire)", func() bool {
		var err error
		got, err = cqrs.Dispatch[Order](ctx, busB, PlaceOrder{SKU: "from B"})
		if err != nil && !errors.Is(err, idem.ErrConflict) {
			t.Fatalf("B: %v", err)
		}
		return err == nil
	})
	if elapsed := time.Since(start); elapsed < lockTTL-20*time.Millisecond {
		t.Fatalf("B took over after %v, before LockTTL %v", elapsed, lockTTL)
	}
	if got.SKU != "from B" || oB.runs.Load() != 1 {
		t.Fatalf("B: %+v after %d runs", got, oB.runs.Load())
	}
	release()
	if r := idemtest.Recv(t, a); !errors.Is(r.err, idem.ErrLeaseLost) {
		t.Fatalf("A's late result: %+v, want ErrLeaseLost", r)
	}
	if again, err := cqrs.Dispatch[Order](ctx, busA, PlaceOrder{}); err != nil || again != got {
		t.Fatalf("after all: %+v %v, want B's result", again, err)
	}
}
