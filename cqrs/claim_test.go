package cqrs_test

import (
	"context"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/cqrs"
)

// A command handler run by the idempotency behaviour holds its claim.
func TestHandlerSeesItsClaim(t *testing.T) {
	ctx := context.Background()
	p, err := cqrs.NewIdempotency(cqrs.IdempotencyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	var bus cqrs.Bus
	if err := bus.Use(p); err != nil {
		t.Fatal(err)
	}
	var c idem.Claim
	var ok bool
	if err := cqrs.HandleCommand(&bus, func(ctx context.Context, cmd PlaceOrder) (Order, error) {
		c, ok = idem.ClaimFrom(ctx)
		return Order{ID: "o-1"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := cqrs.Dispatch[Order](cqrs.WithRequestID(ctx, "req-1"), &bus, PlaceOrder{SKU: "a", Qty: 1}); err != nil {
		t.Fatal(err)
	}
	if !ok || c.Fence == 0 || c.Attempt != 1 || c.Key == "" {
		t.Fatalf("handler claim = %+v (%v)", c, ok)
	}
}
