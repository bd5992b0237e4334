package cqrs_test

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	htemplate "html/template"
	ttemplate "text/template"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/cqrs"
	"github.com/idemrt/idem/internal/idemtest"
)

// A holder that never finishes, in a live process, is taken over after
// LockTTL: the lock is not renewed.
func TestHungHolderTakenOverAfterLockTTL(t *testing.T) {
	o := newOrders()
	bus := newBus(t, newIdem(t, cqrs.IdempotencyOptions{LockTTL: 150 * time.Millisecond}), o)
	ctx := reqCtx("acme", "req-hung")
	release := o.Hold()
	defer release()
	callCtx, cancel := context.WithCancel(ctx)
	first := goPlace(callCtx, bus, PlaceOrder{SKU: "hangs"})
	o.WaitStarted(t)
	o.Unhold() // only the first run hangs
	cancel()   // the caller gives up; the handler hangs on
	idemtest.Recv(t, first)
	time.Sleep(600 * time.Millisecond) // four LockTTLs
	got, err := cqrs.Dispatch[Order](ctx, bus, PlaceOrder{SKU: "retry"})
	if err != nil || got.SKU != "retry" {
		t.Fatalf("retry 4×LockTTL after a holder that never finishes: %+v %v, want a takeover", got, err)
	}
}

// Unnamed command types name the packages of their parts, so
// []*text/template.Template and []*html/template.Template are told apart: a
// request id reused by the other type fails with ErrFingerprintMismatch.
func TestSameNameDifferentTypes(t *testing.T) {
	p := newIdem(t, cqrs.IdempotencyOptions{})
	var bus cqrs.Bus
	if err := bus.Use(p); err != nil {
		t.Fatal(err)
	}
	var runsA, runsB atomic.Int32
	if err := cqrs.HandleCommand(&bus, func(ctx context.Context, c []*ttemplate.Template) (string, error) {
		runsA.Add(1)
		return "text", nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := cqrs.HandleCommand(&bus, func(ctx context.Context, c []*htemplate.Template) (string, error) {
		runsB.Add(1)
		return "html", nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := reqCtx("", "req-1")
	if got, err := cqrs.Dispatch[string](ctx, &bus, []*ttemplate.Template{}); err != nil || got != "text" {
		t.Fatalf("text: %q %v", got, err)
	}
	got, err := cqrs.Dispatch[string](ctx, &bus, []*htemplate.Template{})
	if !errors.Is(err, idem.ErrFingerprintMismatch) {
		t.Fatalf("another command type with the same request id: %q %v (html handler runs %d), want ErrFingerprintMismatch",
			got, err, runsB.Load())
	}
}

// Two types with one name (declared inside functions) cannot both be
// registered: their fingerprints would be the same, and one command would
// be taken for the other.
func TestSameNameLocalTypesRefused(t *testing.T) {
	var bus cqrs.Bus
	if err := localA(&bus); err != nil {
		t.Fatal(err)
	}
	if err := localB(&bus); !errors.Is(err, cqrs.ErrDuplicateHandler) {
		t.Fatalf("a second type named like the first: %v, want ErrDuplicateHandler", err)
	}
}

func localA(bus *cqrs.Bus) error {
	type Cmd struct{ N int }
	return cqrs.HandleCommand(bus, func(context.Context, Cmd) (string, error) { return "A", nil })
}

func localB(bus *cqrs.Bus) error {
	type Cmd struct{ N int }
	return cqrs.HandleCommand(bus, func(context.Context, Cmd) (string, error) { return "B", nil })
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

// A typed-nil *Idempotency is refused by Use.
func TestUseTypedNilBehaviour(t *testing.T) {
	var bus cqrs.Bus
	var p *cqrs.Idempotency
	err := bus.Use(p)
	if err == nil {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Use accepted a nil *Idempotency; Dispatch panicked: %v", r)
			}
		}()
		_ = cqrs.HandleCommand(&bus, func(context.Context, PlaceOrder) (Order, error) { return Order{}, nil })
		_, _ = cqrs.Dispatch[Order](reqCtx("", "r"), &bus, PlaceOrder{})
	}
}
