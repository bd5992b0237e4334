package cqrs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/cqrs"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store/memstore"
)

// The command bus's two TTLs: ProcessedTTL, how long a result is kept (the
// core's TTL), and LockTTL, how long a command's lock holds (the core's
// lease, here never renewed).

// Results are kept for ProcessedTTL (default 24h), then the command runs
// again; the default lock TTL is 60s.
func TestTTLs(t *testing.T) {
	for _, tc := range []struct {
		processed, lock time.Duration
		wantProcessed   time.Duration
		wantLock        time.Duration
	}{
		{0, 0, 24 * time.Hour, 60 * time.Second},
		{time.Hour, 5 * time.Second, time.Hour, 5 * time.Second},
	} {
		clk := idemtest.FakeClock()
		rt := idemtest.Runtime(t, idem.Options{Clock: clk})
		o := newOrders()
		bus := newBus(t, newIdem(t, cqrs.IdempotencyOptions{Runtime: rt, ProcessedTTL: tc.processed, LockTTL: tc.lock}), o)

		// The lock: a duplicate sees the holder's lease.
		release := o.Hold()
		owner := goPlace(reqCtx("", "lock"), bus, PlaceOrder{})
		o.WaitStarted(t)
		_, err := cqrs.Dispatch[Order](reqCtx("", "lock"), bus, PlaceOrder{})
		var ce *idem.ConflictError
		if !errors.As(err, &ce) || ce.LeaseLeft != tc.wantLock {
			t.Fatalf("conflict %v: lease left %v, want %v", err, ce.LeaseLeft, tc.wantLock)
		}
		release()
		idemtest.Recv(t, owner)
		o.runs.Store(0)
		o.Unhold()

		ctx := reqCtx("", "ttl")
		if _, err := cqrs.Dispatch[Order](ctx, bus, PlaceOrder{}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(tc.wantProcessed - time.Nanosecond)
		_, _ = cqrs.Dispatch[Order](ctx, bus, PlaceOrder{})
		if n := o.runs.Load(); n != 1 {
			t.Fatalf("just before ProcessedTTL: %d runs, want 1", n)
		}
		clk.Advance(time.Nanosecond)
		_, _ = cqrs.Dispatch[Order](ctx, bus, PlaceOrder{})
		if n := o.runs.Load(); n != 2 {
			t.Fatalf("at ProcessedTTL: %d runs, want 2", n)
		}
	}
}

// A holder that never finishes (its instance hangs and cannot renew its
// lock) is taken over after LockTTL, on a fake clock; its late result is
// refused.
func TestLockTTLTakeover(t *testing.T) {
	clk := idemtest.FakeClock()
	mem := memstore.New(memstore.Options{Clock: clk})
	defer mem.Close()
	rtA := idemtest.Runtime(t, idem.Options{Store: noRenew{mem}, Clock: clk})
	rtB := idemtest.Runtime(t, idem.Options{Store: mem, Clock: clk})
	const lockTTL = 30 * time.Second
	oA, oB := newOrders(), newOrders()
	busA := newBus(t, newIdem(t, cqrs.IdempotencyOptions{Runtime: rtA, LockTTL: lockTTL}), oA)
	busB := newBus(t, newIdem(t, cqrs.IdempotencyOptions{Runtime: rtB, LockTTL: lockTTL}), oB)
	ctx := reqCtx("t1", "req-1")

	release := oA.Hold()
	defer release()
	a := goPlace(ctx, busA, PlaceOrder{SKU: "from A"})
	oA.WaitStarted(t)
	if _, err := cqrs.Dispatch[Order](ctx, busB, PlaceOrder{SKU: "from B"}); !errors.Is(err, idem.ErrConflict) {
		t.Fatalf("B while A holds the lock: %v", err)
	}
	clk.Advance(lockTTL - time.Nanosecond)
	if _, err := cqrs.Dispatch[Order](ctx, busB, PlaceOrder{SKU: "from B"}); !errors.Is(err, idem.ErrConflict) {
		t.Fatalf("B just before LockTTL: %v", err)
	}
	clk.Advance(time.Nanosecond)
	got, err := cqrs.Dispatch[Order](ctx, busB, PlaceOrder{SKU: "from B"})
	if err != nil || got.SKU != "from B" {
		t.Fatalf("B after LockTTL: %+v %v, want a takeover", got, err)
	}
	release()
	if r := idemtest.Recv(t, a); !errors.Is(r.err, idem.ErrLeaseLost) {
		t.Fatalf("A's late result: %+v, want ErrLeaseLost", r)
	}
	if again, err := cqrs.Dispatch[Order](ctx, busA, PlaceOrder{SKU: "from A"}); err != nil || again != got {
		t.Fatalf("after all: %+v %v, want B's result", again, err)
	}
}

// A holder that never finishes, in a live process, is taken over after
// LockTTL: the lock is not renewed.
func TestHungHolderTakenOverAfterLockTTL(t *testing.T) {
	clk := idemtest.FakeClock()
	rt := idemtest.Runtime(t, idem.Options{Clock: clk})
	const lockTTL = 150 * time.Millisecond
	o := newOrders()
	bus := newBus(t, newIdem(t, cqrs.IdempotencyOptions{Runtime: rt, LockTTL: lockTTL}), o)
	ctx := reqCtx("acme", "req-hung")
	release := o.Hold()
	defer release()
	callCtx, cancel := context.WithCancel(ctx)
	first := goPlace(callCtx, bus, PlaceOrder{SKU: "hangs"})
	o.WaitStarted(t)
	o.Unhold() // only the first run hangs
	cancel()   // the caller gives up; the handler hangs on
	idemtest.Recv(t, first)
	// The end of the lock is the only timer: move the clock once it is armed.
	idemtest.Eventually(t, "the lock's end to be armed", func() bool { return clk.Timers() == 1 })
	clk.Advance(4 * lockTTL)
	got, err := cqrs.Dispatch[Order](ctx, bus, PlaceOrder{SKU: "retry"})
	if err != nil || got.SKU != "retry" {
		t.Fatalf("retry 4×LockTTL after a holder that never finishes: %+v %v, want a takeover", got, err)
	}
}
