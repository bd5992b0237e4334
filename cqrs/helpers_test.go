package cqrs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/cqrs"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

var bg = context.Background()

// epoch is where fake clocks start.
var epoch = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

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

// newRuntime starts a runtime that the test closes at its end.
func newRuntime(t testing.TB, opts idem.Options) *idem.Runtime { return idemtest.Runtime(t, opts) }

// newIdem returns an idempotency behaviour that the test closes at its end.
func newIdem(t testing.TB, opts cqrs.IdempotencyOptions) *cqrs.Idempotency {
	t.Helper()
	p, err := cqrs.NewIdempotency(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(bg, 10*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Idempotency Close: %v", err)
		}
	})
	return p
}

// orders is a command handler that counts its runs; while gate is set, each
// run announces itself on started and waits for gate to close.
type orders struct {
	runs    atomic.Int32
	seq     atomic.Int32
	mu      sync.Mutex
	gate    chan struct{}
	started chan struct{}
	fail    error // returned (once) when set
}

func newOrders() *orders { return &orders{started: make(chan struct{}, 1000)} }

// hold makes the next runs wait until the returned func is called.
func (o *orders) hold() (release func()) {
	g := make(chan struct{})
	o.mu.Lock()
	o.gate = g
	o.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(g) }) }
}

func (o *orders) place(ctx context.Context, c PlaceOrder) (Order, error) {
	o.runs.Add(1)
	o.mu.Lock()
	g, fail := o.gate, o.fail
	o.fail = nil
	o.mu.Unlock()
	if g != nil {
		o.started <- struct{}{}
		<-g
	}
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

func recv(t testing.TB, ch <-chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(15 * time.Second):
		t.Fatal("no answer within 15s")
		return answer{}
	}
}

func waitStarted(t testing.TB, o *orders) {
	t.Helper()
	select {
	case <-o.started:
	case <-time.After(15 * time.Second):
		t.Fatal("the handler did not start within 15s")
	}
}

// eventually waits until cond holds, failing the test after 15s.
func eventually(t testing.TB, what string, cond func() bool) { idemtest.Eventually(t, what, cond) }

// noExtend is a store whose lease renewals fail, as for an instance that
// hangs or lost its store: its leases run out while its handler runs.
type noExtend struct{ store.Store }

func (noExtend) Renew(context.Context, string, store.Token, time.Duration) error {
	return errors.New("test: renewals refused")
}
