package cqrs_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/cqrs"
	"github.com/idemrt/idem/internal/idemtest"
)

// The behaviour's policy: its own defaults (the reference design's: a 60s
// lock, a 24h processed TTL, fail fast), not the runtime's; the lock and
// processed TTLs under either name; a settle time to wait instead.

func TestPolicyResolves(t *testing.T) {
	// A runtime tuned for other front ends: the bus does not take its
	// policy.
	tuned := idem.Policy{Settle: time.Hour, Lease: 10 * time.Minute, TTL: 2 * time.Hour}
	for _, c := range []struct {
		name            string
		opts            cqrs.IdempotencyOptions
		lock, processed time.Duration
	}{
		{"defaults", cqrs.IdempotencyOptions{}, 60 * time.Second, 24 * time.Hour},
		{"reference names", cqrs.IdempotencyOptions{LockTTL: 5 * time.Second, ProcessedTTL: time.Hour}, 5 * time.Second, time.Hour},
		{"policy names", cqrs.IdempotencyOptions{Policy: idem.Policy{Lease: 5 * time.Second, TTL: time.Hour}}, 5 * time.Second, time.Hour},
		{"one of each", cqrs.IdempotencyOptions{LockTTL: 7 * time.Second, Policy: idem.Policy{TTL: 3 * time.Hour}}, 7 * time.Second, 3 * time.Hour},
	} {
		clk := idemtest.FakeClock()
		rt := idemtest.Runtime(t, idem.Options{Clock: clk, Policy: tuned})
		c.opts.Runtime = rt
		o := newOrders()
		bus := newBus(t, newIdem(t, c.opts), o)

		// A duplicate fails at once, with the holder's lock left.
		release := o.Hold()
		owner := goPlace(reqCtx("", "lock"), bus, PlaceOrder{})
		o.WaitStarted(t)
		_, err := cqrs.Dispatch[Order](reqCtx("", "lock"), bus, PlaceOrder{})
		var ce *idem.ConflictError
		if !errors.As(err, &ce) || ce.LeaseLeft != c.lock {
			t.Fatalf("%s: duplicate: %v; want a conflict at once, with a lock of %v left", c.name, err, c.lock)
		}
		release()
		if r := idemtest.Recv(t, owner); r.err != nil {
			t.Fatal(r.err)
		}
		key, _ := cqrs.Key("", "lock")
		st, err := rt.State(bg, key)
		if err != nil || st.ExpiresAt.Sub(st.CreatedAt) != c.processed {
			t.Fatalf("%s: kept for %v (%v), want %v", c.name, st.ExpiresAt.Sub(st.CreatedAt), err, c.processed)
		}
	}
}

// With a settle time, a duplicate waits for the holder's result instead of
// failing fast.
func TestPolicySettleWaits(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	o := newOrders()
	bus := newBus(t, newIdem(t, cqrs.IdempotencyOptions{Runtime: rt, Policy: idem.Policy{Settle: time.Hour}}), o)
	release := o.Hold()
	defer release()
	owner := goPlace(reqCtx("", "wait"), bus, PlaceOrder{SKU: "book"})
	o.WaitStarted(t)
	dup := goPlace(reqCtx("", "wait"), bus, PlaceOrder{SKU: "book"})
	idemtest.Eventually(t, "the duplicate parked", func() bool { return rt.Stats().Waiters == 1 })
	release()
	first, second := idemtest.Recv(t, owner), idemtest.Recv(t, dup)
	if first.err != nil || second.err != nil || second.o != first.o {
		t.Fatalf("owner %+v, duplicate %+v; want the owner's order twice", first, second)
	}
	if n := o.runs.Load(); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}

func TestPolicyRefused(t *testing.T) {
	for _, c := range []struct {
		opts cqrs.IdempotencyOptions
		want string
	}{
		{cqrs.IdempotencyOptions{LockTTL: time.Second, Policy: idem.Policy{Lease: time.Second}}, "LockTTL and Lease are both set"},
		{cqrs.IdempotencyOptions{ProcessedTTL: time.Hour, Policy: idem.Policy{TTL: 2 * time.Hour}}, "ProcessedTTL and TTL are both set"},
		{cqrs.IdempotencyOptions{LockTTL: -time.Second}, "IdempotencyOptions.LockTTL -1s must be positive"},
		{cqrs.IdempotencyOptions{Policy: idem.Policy{Lease: -time.Second}}, "IdempotencyOptions.Lease is -1s"},
		{cqrs.IdempotencyOptions{Policy: idem.Policy{FailFast: true, Settle: time.Second}}, "IdempotencyOptions.FailFast is set"},
		{cqrs.IdempotencyOptions{Policy: idem.Policy{Classifier: func(error) bool { return true }}}, "Classifier is set"},
	} {
		p, err := cqrs.NewIdempotency(c.opts)
		if !errors.Is(err, idem.ErrInvalidArgument) || p != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewIdempotency: %v, %v; want ErrInvalidArgument saying %q", p, err, c.want)
		}
	}
}
