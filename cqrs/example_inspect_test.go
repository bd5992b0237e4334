package cqrs_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/idemrt/idem/cqrs"
)

// chargeBus is a bus that charges cards once per request id, with the
// behaviour's own private runtime.
func chargeBus() (*cqrs.Bus, *cqrs.Idempotency) {
	idemp, err := cqrs.NewIdempotency(cqrs.IdempotencyOptions{})
	if err != nil {
		panic(err)
	}
	var bus cqrs.Bus
	_ = bus.Use(idemp)
	_ = cqrs.HandleCommand(&bus, func(ctx context.Context, c ChargeCard) (Receipt, error) {
		return Receipt{ID: "rcpt-" + c.OrderID, Cents: c.Cents}, nil
	})
	return &bus, idemp
}

func ExampleIdempotency_Processed() {
	ctx := context.Background()
	bus, idemp := chargeBus()
	defer idemp.Close(ctx)
	ok, _ := idemp.Processed(ctx, "acme", "req-1")
	fmt.Println(ok)
	_, _ = cqrs.Dispatch[Receipt](cqrs.WithTenant(cqrs.WithRequestID(ctx, "req-1"), "acme"), bus, ChargeCard{OrderID: "o-1", Cents: 900})
	ok, _ = idemp.Processed(ctx, "acme", "req-1")
	fmt.Println(ok)
	// Output:
	// false
	// true
}

func ExampleIdempotency_Payload() {
	ctx := context.Background()
	bus, idemp := chargeBus()
	defer idemp.Close(ctx)
	_, _ = cqrs.Dispatch[Receipt](cqrs.WithRequestID(ctx, "req-2"), bus, ChargeCard{OrderID: "o-2", Cents: 1500})
	raw, err := idemp.Payload(ctx, "", "req-2")
	fmt.Println(string(raw), err)
	var r Receipt
	_ = json.Unmarshal(raw, &r)
	fmt.Println(r.ID, r.Cents)
	// Output:
	// {"ID":"rcpt-o-2","Cents":1500} <nil>
	// rcpt-o-2 1500
}

func ExampleIdempotency_Forget() {
	ctx := context.Background()
	bus, idemp := chargeBus()
	defer idemp.Close(ctx)
	req := cqrs.WithRequestID(ctx, "req-3")
	_, _ = cqrs.Dispatch[Receipt](req, bus, ChargeCard{OrderID: "o-3", Cents: 100})
	fmt.Println(idemp.Forget(ctx, "", "req-3")) // the next dispatch runs the handler again
	ok, _ := idemp.Processed(ctx, "", "req-3")
	fmt.Println(ok)
	// Output:
	// <nil>
	// false
}
