package cqrs_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/cqrs"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// Processed, Payload and Forget: a command's record by tenant and request
// id, with the behaviour's private runtime and with a runtime of the
// caller's, on one instance and across two on Redis.

func TestProcessedPayloadForget(t *testing.T) {
	for name, opts := range map[string]cqrs.IdempotencyOptions{
		"private runtime": {},
		"given runtime":   {Runtime: idemtest.Runtime(t, idem.Options{})},
	} {
		t.Run(name, func(t *testing.T) {
			p := newIdem(t, opts)
			o := newOrders()
			bus := newBus(t, p, o)
			if ok, err := p.Processed(bg, "acme", "req-1"); ok || err != nil {
				t.Fatalf("before the dispatch: %v %v", ok, err)
			}
			if _, err := p.Payload(bg, "acme", "req-1"); !errors.Is(err, idem.ErrNotFound) {
				t.Fatalf("payload before the dispatch: %v", err)
			}
			first, err := cqrs.Dispatch[Order](reqCtx("acme", "req-1"), bus, PlaceOrder{SKU: "book", Qty: 2})
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := p.Processed(bg, "acme", "req-1"); !ok || err != nil {
				t.Fatalf("after the dispatch: %v %v", ok, err)
			}
			if ok, err := p.Processed(bg, "globex", "req-1"); ok || err != nil {
				t.Fatalf("the same request id in another tenant: %v %v", ok, err)
			}
			raw, err := p.Payload(bg, "acme", "req-1")
			var got Order
			if err != nil || json.Unmarshal(raw, &got) != nil || got != first {
				t.Fatalf("payload %s, %v; want %+v", raw, err, first)
			}
			if err := p.Forget(bg, "acme", "req-1"); err != nil {
				t.Fatal(err)
			}
			if ok, err := p.Processed(bg, "acme", "req-1"); ok || err != nil {
				t.Fatalf("after Forget: %v %v", ok, err)
			}
			again, err := cqrs.Dispatch[Order](reqCtx("acme", "req-1"), bus, PlaceOrder{SKU: "book", Qty: 2})
			if err != nil || again == first || o.runs.Load() != 2 {
				t.Fatalf("after Forget the handler runs again: %+v %v (%d runs)", again, err, o.runs.Load())
			}
		})
	}
}

func TestProcessedInProgress(t *testing.T) {
	p := newIdem(t, cqrs.IdempotencyOptions{})
	o := newOrders()
	bus := newBus(t, p, o)
	release := o.Hold()
	defer release()
	ch := goPlace(reqCtx("", "req-2"), bus, PlaceOrder{SKU: "pen", Qty: 1})
	o.WaitStarted(t)
	if ok, err := p.Processed(bg, "", "req-2"); ok || err != nil {
		t.Fatalf("in progress: %v %v", ok, err)
	}
	if _, err := p.Payload(bg, "", "req-2"); !errors.Is(err, idem.ErrInProgress) {
		t.Fatalf("payload in progress: %v", err)
	}
	if err := p.Forget(bg, "", "req-2"); !errors.Is(err, idem.ErrConflict) {
		t.Fatalf("forget in progress: %v", err)
	}
	release()
	if a := idemtest.Recv(t, ch); a.err != nil {
		t.Fatal(a.err)
	}
	if ok, err := p.Processed(bg, "", "req-2"); !ok || err != nil {
		t.Fatalf("done: %v %v", ok, err)
	}
}

// batched is a store the runtime batches (its methods are store.Store's
// only): a shard has cached a command's result when its dispatch returns.
type batched struct{ store.Store }

// Measure is a command whose handler's result cannot be encoded (JSON has
// no infinity).
type Measure struct{}

// A command whose result cannot be encoded is processed (its handler ran;
// the *idem.CodecError is kept as its result), and answered the same on
// the instance that ran it, from its cache, as on another, from the store.
func TestProcessedUnencodableOnEveryInstance(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	here := newIdem(t, cqrs.IdempotencyOptions{Runtime: idemtest.Runtime(t, idem.Options{Store: batched{mem}})})
	elsewhere := newIdem(t, cqrs.IdempotencyOptions{Runtime: idemtest.Runtime(t, idem.Options{Store: mem})})
	var bus cqrs.Bus
	if err := bus.Use(here); err != nil {
		t.Fatal(err)
	}
	if err := cqrs.HandleCommand(&bus, func(context.Context, Measure) (float64, error) { return math.Inf(1), nil }); err != nil {
		t.Fatal(err)
	}
	var ce *idem.CodecError
	if _, err := cqrs.Dispatch[float64](reqCtx("acme", "m-1"), &bus, Measure{}); !errors.As(err, &ce) {
		t.Fatalf("dispatch: %v, want the *idem.CodecError", err)
	}
	key, err := cqrs.Key("acme", "m-1")
	if err != nil {
		t.Fatal(err)
	}
	for who, p := range map[string]*cqrs.Idempotency{"the instance that ran it": here, "another instance": elsewhere} {
		if ok, err := p.Processed(bg, "acme", "m-1"); !ok || err != nil {
			t.Errorf("%s: Processed %v, %v; want true", who, ok, err)
		}
		_, err := p.Payload(bg, "acme", "m-1")
		if !errors.As(err, &ce) || ce.Key != key || ce.Op != "encode" || !idem.IsPermanent(err) {
			t.Errorf("%s: Payload %#v; want a permanent error with the *idem.CodecError", who, err)
		}
	}
}

func TestProcessedRefuses(t *testing.T) {
	p := newIdem(t, cqrs.IdempotencyOptions{})
	if _, err := p.Processed(bg, "acme", ""); !errors.Is(err, cqrs.ErrNoRequestID) {
		t.Fatalf("no request id: %v", err)
	}
	if _, err := p.Payload(bg, "acme\x01", "r"); !errors.Is(err, cqrs.ErrInvalidTenant) {
		t.Fatalf("a bad tenant: %v", err)
	}
	if err := p.Forget(bg, "", "r\x00"); !errors.Is(err, cqrs.ErrInvalidRequestID) {
		t.Fatalf("a bad request id: %v", err)
	}
	if err := p.Close(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Processed(bg, "acme", "r"); !errors.Is(err, idem.ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}

// A command processed on one instance is processed on the other, and
// forgotten there for both.
func TestProcessedAcrossInstances(t *testing.T) {
	rts := redisInstances(t, 2, nil)
	o := newOrders()
	p0 := newIdem(t, cqrs.IdempotencyOptions{Runtime: rts[0]})
	p1 := newIdem(t, cqrs.IdempotencyOptions{Runtime: rts[1]})
	bus0 := newBus(t, p0, o)
	if _, err := cqrs.Dispatch[Order](reqCtx("acme", "req-3"), bus0, PlaceOrder{SKU: "mug", Qty: 1}); err != nil {
		t.Fatal(err)
	}
	if ok, err := p1.Processed(bg, "acme", "req-3"); !ok || err != nil {
		t.Fatalf("on the other instance: %v %v", ok, err)
	}
	if err := p1.Forget(bg, "acme", "req-3"); err != nil {
		t.Fatal(err)
	}
	if ok, err := p1.Processed(bg, "acme", "req-3"); ok || err != nil {
		t.Fatalf("forgotten: %v %v", ok, err)
	}
}
