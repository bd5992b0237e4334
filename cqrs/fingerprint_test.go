package cqrs_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	htemplate "html/template"
	"strings"
	"sync/atomic"
	"testing"
	ttemplate "text/template"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/cqrs"
)

// Fingerprints: a request id reused by another command, or by another
// command type, is refused with ErrFingerprintMismatch, not replayed.

// A request id reused by another command type is refused, not replayed.
func TestFingerprint(t *testing.T) {
	o := newOrders()
	bus := newBus(t, newIdem(t, cqrs.IdempotencyOptions{}), o)
	ctx := reqCtx("", "req-1")
	if _, err := cqrs.Dispatch[Order](ctx, bus, PlaceOrder{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cqrs.Dispatch[bool](ctx, bus, CancelOrder{}); !errors.Is(err, idem.ErrFingerprintMismatch) {
		t.Fatalf("another command type: %v, want ErrFingerprintMismatch", err)
	}

	// A fingerprint over the command's fields refuses a reuse with other
	// arguments; its errors reach the caller.
	byFields := func(msg *cqrs.Message) ([]byte, error) {
		c, ok := msg.Value.(PlaceOrder)
		if !ok {
			return nil, errors.New("not a PlaceOrder")
		}
		sum := sha256.Sum256(fmt.Appendf(nil, "%s|%s|%d", msg.Name, c.SKU, c.Qty))
		return sum[:], nil
	}
	bus2 := newBus(t, newIdem(t, cqrs.IdempotencyOptions{Fingerprint: byFields}), newOrders())
	if _, err := cqrs.Dispatch[Order](ctx, bus2, PlaceOrder{SKU: "a", Qty: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := cqrs.Dispatch[Order](ctx, bus2, PlaceOrder{SKU: "a", Qty: 2}); !errors.Is(err, idem.ErrFingerprintMismatch) {
		t.Fatalf("other arguments: %v", err)
	}
	if _, err := cqrs.Dispatch[Order](ctx, bus2, PlaceOrder{SKU: "a", Qty: 1}); err != nil {
		t.Fatalf("same arguments: %v", err)
	}
	if _, err := cqrs.Dispatch[bool](ctx, bus2, CancelOrder{}); err == nil || !strings.Contains(err.Error(), "not a PlaceOrder") {
		t.Fatalf("fingerprint error: %v", err)
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
