package cqrs_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/cqrs"
	"github.com/idemrt/idem/internal/idemtest"
)

// A processed command is replayed without calling the handler.
func TestReplay(t *testing.T) {
	o := newOrders()
	bus := newBus(t, newIdem(t, cqrs.IdempotencyOptions{}), o)
	ctx := reqCtx("", "req-1")
	first, err := cqrs.Dispatch[Order](ctx, bus, PlaceOrder{SKU: "book", Qty: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		again, err := cqrs.Dispatch[Order](ctx, bus, PlaceOrder{SKU: "book", Qty: 1})
		if err != nil || again != first {
			t.Fatalf("replay: %+v %v, want %+v", again, err, first)
		}
	}
	if n := o.runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times", n)
	}
	// Another request id is another command.
	if other, err := cqrs.Dispatch[Order](reqCtx("", "req-2"), bus, PlaceOrder{SKU: "book", Qty: 1}); err != nil || other == first {
		t.Fatalf("second request: %+v %v", other, err)
	}
}

// While one holder runs a command, a duplicate fails at once with a
// conflict; 50 concurrent duplicates run the handler once.
func TestConflictWhileInFlight(t *testing.T) {
	o := newOrders()
	bus := newBus(t, newIdem(t, cqrs.IdempotencyOptions{}), o)
	ctx := reqCtx("acme", "req-1")
	release := o.Hold()
	defer release()
	owner := goPlace(ctx, bus, PlaceOrder{SKU: "book"})
	o.WaitStarted(t)

	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() {
			_, err := cqrs.Dispatch[Order](ctx, bus, PlaceOrder{SKU: "book"})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		var ce *idem.ConflictError
		if !errors.Is(err, idem.ErrConflict) || !errors.As(err, &ce) {
			t.Fatalf("duplicate: %v, want a conflict", err)
		}
		if !strings.Contains(err.Error(), "PlaceOrder") || !strings.Contains(ce.Key, "idempotency_lock:tenant:acme:command:req-1") {
			t.Fatalf("conflict %q does not name the command and key", err)
		}
	}
	release()
	a := idemtest.Recv(t, owner)
	if a.err != nil {
		t.Fatal(a.err)
	}
	if again, err := cqrs.Dispatch[Order](ctx, bus, PlaceOrder{SKU: "book"}); err != nil || again != a.o {
		t.Fatalf("after the run: %+v %v", again, err)
	}
	if n := o.runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times", n)
	}
}

// A failure stores nothing and releases the lock, so the retry runs: even an
// error marked idem.Permanent, and even with a runtime whose classifier would
// keep it. The caller gets the handler's own error.
func TestFailureReleasesLock(t *testing.T) {
	errDeclined := errors.New("card declined")
	rt := idemtest.Runtime(t, idem.Options{Policy: idem.Policy{Classifier: func(error) bool { return true }}})
	for _, fail := range []error{errDeclined, idem.Permanent(errDeclined)} {
		o := newOrders()
		var bus cqrs.Bus
		_ = bus.Use(newIdem(t, cqrs.IdempotencyOptions{Runtime: rt}))
		_ = cqrs.HandleCommand(&bus, o.place)
		ctx := reqCtx("", fmt.Sprintf("req-%p", fail))
		o.failNext(fail)
		_, err := cqrs.Dispatch[Order](ctx, &bus, PlaceOrder{SKU: "book"})
		if err != fail {
			t.Fatalf("first: %v, want the handler's error value %v", err, fail)
		}
		got, err := cqrs.Dispatch[Order](ctx, &bus, PlaceOrder{SKU: "book"})
		if err != nil || got.SKU != "book" {
			t.Fatalf("retry: %+v %v", got, err)
		}
		if again, err := cqrs.Dispatch[Order](ctx, &bus, PlaceOrder{SKU: "book"}); err != nil || again != got {
			t.Fatalf("replay after the retry: %+v %v", again, err)
		}
		if n := o.runs.Load(); n != 2 {
			t.Fatalf("handler ran %d times, want 2", n)
		}
	}
}

// A panicking handler reaches the caller as *idem.PanicError and releases
// the lock.
func TestPanicReleasesLock(t *testing.T) {
	var bus cqrs.Bus
	_ = bus.Use(newIdem(t, cqrs.IdempotencyOptions{}))
	runs := 0
	_ = cqrs.HandleCommand(&bus, func(ctx context.Context, c PlaceOrder) (Order, error) {
		runs++
		if runs == 1 {
			panic("boom")
		}
		return Order{ID: "ok"}, nil
	})
	ctx := reqCtx("", "req-1")
	_, err := cqrs.Dispatch[Order](ctx, &bus, PlaceOrder{})
	var pe *idem.PanicError
	if !errors.As(err, &pe) || pe.Value != "boom" {
		t.Fatalf("panic: %v", err)
	}
	if o, err := cqrs.Dispatch[Order](ctx, &bus, PlaceOrder{}); err != nil || o.ID != "ok" {
		t.Fatalf("retry: %+v %v", o, err)
	}
}

// A handler that succeeds with a result the codec cannot encode (a NaN):
// the command ran, so a retry must not run it again; both get the
// *idem.CodecError (docs/cqrs.md).
func TestUnencodableResultKept(t *testing.T) {
	p := newIdem(t, cqrs.IdempotencyOptions{})
	var bus cqrs.Bus
	if err := bus.Use(p); err != nil {
		t.Fatal(err)
	}
	type Quote struct{ Price float64 }
	type GetQuoteCmd struct{}
	var runs atomic.Int32
	if err := cqrs.HandleCommand(&bus, func(context.Context, GetQuoteCmd) (Quote, error) {
		if runs.Add(1) == 1 {
			return Quote{Price: math.NaN()}, nil
		}
		return Quote{Price: 1}, nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := reqCtx("", "req-nan")
	_, err1 := cqrs.Dispatch[Quote](ctx, &bus, GetQuoteCmd{})
	_, err2 := cqrs.Dispatch[Quote](ctx, &bus, GetQuoteCmd{})
	var ce1, ce2 *idem.CodecError
	if !errors.As(err1, &ce1) || !errors.As(err2, &ce2) || runs.Load() != 1 {
		t.Fatalf("first %v; retry %v; runs %d", err1, err2, runs.Load())
	}
}

// The same request id in two tenants (and without a tenant) runs once in
// each; tenants and ids with ':' and '%' cannot collide.
func TestTenantIsolation(t *testing.T) {
	o := newOrders()
	bus := newBus(t, newIdem(t, cqrs.IdempotencyOptions{}), o)
	cases := []struct{ tenant, id string }{
		{"", "req-1"},
		{"acme", "req-1"},
		{"globex", "req-1"},
		// Unescaped, these two would both be
		// idempotency_lock:tenant:a:command:b:command:c.
		{"a:command:b", "c"},
		{"a", "b:command:c"},
		{"a%3Acommand%3Ab", "c"},
		{"a", "%"},
		{"a", "%25"},
	}
	results := map[Order]bool{}
	for _, c := range cases {
		got, err := cqrs.Dispatch[Order](reqCtx(c.tenant, c.id), bus, PlaceOrder{})
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		results[got] = true
	}
	if n := int(o.runs.Load()); n != len(cases) || len(results) != len(cases) {
		t.Fatalf("%d runs, %d distinct results; want %d of each", n, len(results), len(cases))
	}
	for _, c := range cases { // and each is replayed within its tenant
		if _, err := cqrs.Dispatch[Order](reqCtx(c.tenant, c.id), bus, PlaceOrder{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := int(o.runs.Load()); n != len(cases) {
		t.Fatalf("replays ran the handler: %d runs", n)
	}
}

func TestKey(t *testing.T) {
	for _, c := range []struct{ tenant, id, want string }{
		{"", "r1", "idempotency_lock:command:r1"},
		{"acme", "r1", "idempotency_lock:tenant:acme:command:r1"},
		{"a:b", "c:d%", "idempotency_lock:tenant:a%3Ab:command:c%3Ad%25"},
		{"ünï", "заказ 1", "idempotency_lock:tenant:ünï:command:заказ 1"},
	} {
		got, err := cqrs.Key(c.tenant, c.id)
		if err != nil || got != c.want {
			t.Errorf("Key(%q, %q) = %q, %v; want %q", c.tenant, c.id, got, err, c.want)
		}
	}
	if _, err := cqrs.Key("t", ""); !errors.Is(err, cqrs.ErrNoRequestID) {
		t.Errorf("empty id: %v", err)
	}
	// 255 bytes of ':' in each would escape to more than 1 KiB.
	long := strings.Repeat(":", cqrs.MaxIDLen)
	if _, err := cqrs.Key(long, long); !errors.Is(err, idem.ErrInvalidKey) || !strings.Contains(err.Error(), "1024-byte") {
		t.Errorf("escaped key over 1 KiB: %v", err)
	}
}

// Bad request ids and tenants are clean errors; the handler does not run.
func TestBadRequestIDs(t *testing.T) {
	o := newOrders()
	bus := newBus(t, newIdem(t, cqrs.IdempotencyOptions{}), o)
	bad := map[string]string{
		"NUL":         "a\x00b",
		"newline":     "a\nb",
		"DEL":         "a\x7fb",
		"C1 control":  "a\u0085b",
		"invalid UTF": "a\xffb",
		"too long":    strings.Repeat("x", cqrs.MaxIDLen+1),
	}
	for name, id := range bad {
		_, err := cqrs.Dispatch[Order](reqCtx("", id), bus, PlaceOrder{})
		if !errors.Is(err, cqrs.ErrInvalidRequestID) || !errors.Is(err, idem.ErrInvalidKey) {
			t.Errorf("request id %s: %v, want ErrInvalidRequestID", name, err)
		}
		_, err = cqrs.Dispatch[Order](reqCtx(id, "req-1"), bus, PlaceOrder{})
		if !errors.Is(err, cqrs.ErrInvalidTenant) || !errors.Is(err, idem.ErrInvalidKey) {
			t.Errorf("tenant %s: %v, want ErrInvalidTenant", name, err)
		}
	}
	// No request id at all (or an empty one).
	for _, ctx := range []context.Context{bg, cqrs.WithRequestID(bg, ""), cqrs.WithTenant(bg, "acme")} {
		if _, err := cqrs.Dispatch[Order](ctx, bus, PlaceOrder{}); !errors.Is(err, cqrs.ErrNoRequestID) {
			t.Errorf("no request id: %v", err)
		}
	}
	if n := o.runs.Load(); n != 0 {
		t.Fatalf("handler ran %d times", n)
	}
	// At the limits and with odd but valid characters, it runs.
	for _, id := range []string{strings.Repeat("x", cqrs.MaxIDLen), "a:b%c/d e", "заказ-1", `"quoted"`} {
		if _, err := cqrs.Dispatch[Order](reqCtx("", id), bus, PlaceOrder{}); err != nil {
			t.Errorf("request id %q: %v", id, err)
		}
	}
}

// With Optional, commands without a request id run, every time.
func TestOptional(t *testing.T) {
	o := newOrders()
	bus := newBus(t, newIdem(t, cqrs.IdempotencyOptions{Optional: true}), o)
	for range 2 {
		if _, err := cqrs.Dispatch[Order](bg, bus, PlaceOrder{}); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = cqrs.Dispatch[Order](reqCtx("", "r"), bus, PlaceOrder{})
	_, _ = cqrs.Dispatch[Order](reqCtx("", "r"), bus, PlaceOrder{})
	if n := o.runs.Load(); n != 3 {
		t.Fatalf("%d runs, want 3 (2 without id, 1 with)", n)
	}
}

// Queries pass without idempotency: they run every time, even with a
// request id.
func TestQueriesPass(t *testing.T) {
	o := newOrders()
	bus := newBus(t, newIdem(t, cqrs.IdempotencyOptions{}), o)
	for range 3 {
		if _, err := cqrs.Dispatch[Order](reqCtx("", "r"), bus, GetOrder{OrderID: "1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cqrs.Dispatch[Order](bg, bus, GetOrder{OrderID: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := o.runs.Load(); n != 6 {
		t.Fatalf("%d runs, want 6", n)
	}
}

// A command dispatched by a handler with its own context is part of the
// outer command: it runs, without a conflict on the outer lock.
func TestNestedDispatch(t *testing.T) {
	var bus cqrs.Bus
	_ = bus.Use(newIdem(t, cqrs.IdempotencyOptions{}))
	inner := 0
	_ = cqrs.HandleCommand(&bus, func(ctx context.Context, c CancelOrder) (bool, error) { inner++; return true, nil })
	_ = cqrs.HandleCommand(&bus, func(ctx context.Context, c PlaceOrder) (Order, error) {
		ok, err := cqrs.Dispatch[bool](ctx, &bus, CancelOrder{OrderID: "old"})
		if err != nil || !ok {
			return Order{}, fmt.Errorf("nested: %v %w", ok, err)
		}
		// A nested command with a request id of its own is idempotent
		// by itself.
		sub := cqrs.WithRequestID(ctx, "sub-1")
		if _, err := cqrs.Dispatch[bool](sub, &bus, CancelOrder{}); err != nil {
			return Order{}, err
		}
		if _, err := cqrs.Dispatch[bool](sub, &bus, CancelOrder{}); err != nil {
			return Order{}, err
		}
		return Order{ID: "new"}, nil
	})
	ctx := reqCtx("", "req-1")
	if o, err := cqrs.Dispatch[Order](ctx, &bus, PlaceOrder{}); err != nil || o.ID != "new" {
		t.Fatalf("outer: %+v %v", o, err)
	}
	if inner != 2 {
		t.Fatalf("inner ran %d times, want 2", inner)
	}
}

// A caller that gives up gets ctx.Err() at once; the handler goes on and its
// result is stored for the retry.
func TestCallerCancels(t *testing.T) {
	o := newOrders()
	bus := newBus(t, newIdem(t, cqrs.IdempotencyOptions{}), o)
	ctx, cancel := context.WithCancel(reqCtx("", "req-1"))
	release := o.Hold()
	defer release()
	a := goPlace(ctx, bus, PlaceOrder{SKU: "book"})
	o.WaitStarted(t)
	cancel()
	if r := idemtest.Recv(t, a); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled caller: %+v", r)
	}
	release()
	var got Order
	idemtest.Eventually(t, "the stored result", func() bool {
		var err error
		got, err = cqrs.Dispatch[Order](reqCtx("", "req-1"), bus, PlaceOrder{SKU: "book"})
		return err == nil
	})
	if got.SKU != "book" || o.runs.Load() != 1 {
		t.Fatalf("retry: %+v after %d runs", got, o.runs.Load())
	}
}

func TestIdempotencyOptions(t *testing.T) {
	for _, opts := range []cqrs.IdempotencyOptions{
		{LockTTL: -time.Second},
		{ProcessedTTL: -1},
		{ProcessedTTL: 200 * 365 * 24 * time.Hour},
	} {
		if _, err := cqrs.NewIdempotency(opts); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", opts, err)
		}
	}
}

// The behaviour's own runtime is closed by Close (idempotent); a given
// runtime is not.
func TestClose(t *testing.T) {
	p, err := cqrs.NewIdempotency(cqrs.IdempotencyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bus := newBus(t, p, newOrders())
	if _, err := cqrs.Dispatch[Order](reqCtx("", "r"), bus, PlaceOrder{}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := p.Close(bg); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cqrs.Dispatch[Order](reqCtx("", "r2"), bus, PlaceOrder{}); !errors.Is(err, idem.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}

	rt := idemtest.Runtime(t, idem.Options{})
	q := newIdem(t, cqrs.IdempotencyOptions{Runtime: rt})
	_ = q.Close(bg)
	if _, err := idem.Do(bg, rt, "still open", func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatalf("the given runtime was closed: %v", err)
	}
}

func TestContextFromHeaders(t *testing.T) {
	h := http.Header{}
	h.Set(cqrs.HeaderRequestID, "  req-9 ")
	h.Set(cqrs.HeaderTenant, "acme")
	ctx := cqrs.ContextFromHeaders(bg, h)
	id, ok1 := cqrs.RequestID(ctx)
	tenant, ok2 := cqrs.Tenant(ctx)
	if id != "req-9" || tenant != "acme" || !ok1 || !ok2 {
		t.Fatalf("got %q %v, %q %v", id, ok1, tenant, ok2)
	}
	ctx = cqrs.ContextFromHeaders(bg, http.Header{cqrs.HeaderRequestID: {"  "}})
	if _, ok := cqrs.RequestID(ctx); ok {
		t.Fatal("a blank header gave a request id")
	}
	if _, ok := cqrs.Tenant(ctx); ok {
		t.Fatal("no header gave a tenant")
	}
}
