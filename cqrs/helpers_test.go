package cqrs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem/cqrs"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

var bg = context.Background()

type PlaceOrder struct {
	SKU string
	Qty int
}

type CancelOrder struct{ OrderID string }

type GetOrder struct{ OrderID string }

type Order struct {
	ID  string
	SKU string
	Qty int
}

// newIdem returns an idempotency behaviour that the test closes at its end.
func newIdem(t testing.TB, opts cqrs.IdempotencyOptions) *cqrs.Idempotency {
	t.Helper()
	p, err := cqrs.NewIdempotency(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(bg, idemtest.Timeout)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Idempotency Close: %v", err)
		}
	})
	return p
}

// orders is a command handler that counts its runs; while held, each run
// announces itself on Started and waits (see idemtest.Checkpoint).
type orders struct {
	*idemtest.Checkpoint
	runs atomic.Int32
	seq  atomic.Int32
	mu   sync.Mutex
	fail error // returned (once) when set
}

func newOrders() *orders { return &orders{Checkpoint: idemtest.NewCheckpoint()} }

func (o *orders) place(ctx context.Context, c PlaceOrder) (Order, error) {
	o.runs.Add(1)
	o.mu.Lock()
	fail := o.fail
	o.fail = nil
	o.mu.Unlock()
	o.Pass()
	if fail != nil {
		return Order{}, fail
	}
	n := o.seq.Add(1)
	return Order{ID: fmt.Sprintf("order-%d", n), SKU: c.SKU, Qty: c.Qty}, nil
}

func (o *orders) failNext(err error) {
	o.mu.Lock()
	o.fail = err
	o.mu.Unlock()
}

// newBus returns a bus with the behaviour p and the orders handlers.
func newBus(t testing.TB, p *cqrs.Idempotency, o *orders) *cqrs.Bus {
	t.Helper()
	var bus cqrs.Bus
	if err := bus.Use(p); err != nil {
		t.Fatal(err)
	}
	if err := cqrs.HandleCommand(&bus, o.place); err != nil {
		t.Fatal(err)
	}
	if err := cqrs.HandleCommand(&bus, func(ctx context.Context, c CancelOrder) (bool, error) { return true, nil }); err != nil {
		t.Fatal(err)
	}
	if err := cqrs.HandleQuery(&bus, func(ctx context.Context, q GetOrder) (Order, error) {
		o.runs.Add(1)
		return Order{ID: q.OrderID}, nil
	}); err != nil {
		t.Fatal(err)
	}
	return &bus
}

func reqCtx(tenant, id string) context.Context {
	ctx := cqrs.WithRequestID(bg, id)
	if tenant != "" {
		ctx = cqrs.WithTenant(ctx, tenant)
	}
	return ctx
}

type answer struct {
	o   Order
	err error
}

func goPlace(ctx context.Context, bus *cqrs.Bus, c PlaceOrder) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		o, err := cqrs.Dispatch[Order](ctx, bus, c)
		ch <- answer{o, err}
	}()
	return ch
}

// noRenew is a store whose lease renewals fail, as for an instance that
// hangs or lost its store: its leases run out while its handler runs.
type noRenew struct{ store.Store }

func (noRenew) Renew(context.Context, string, store.Token, time.Duration) error {
	return errors.New("test: renewals refused")
}
