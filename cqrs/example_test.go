package cqrs_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/cqrs"
	"github.com/idemrt/idem/store/memstore"
)

type ChargeCard struct {
	OrderID string
	Cents   int
}

type Receipt struct {
	ID    string
	Cents int
}

// A command bus whose commands run once per request id: the client's retry
// gets the first receipt back and the card is charged once.
func Example() {
	ctx := context.Background()
	idemp, err := cqrs.NewIdempotency(cqrs.IdempotencyOptions{}) // in-memory store
	if err != nil {
		panic(err)
	}
	defer idemp.Close(ctx)

	var bus cqrs.Bus
	_ = bus.Use(idemp)
	charges := 0
	_ = cqrs.HandleCommand(&bus, func(ctx context.Context, c ChargeCard) (Receipt, error) {
		charges++
		return Receipt{ID: fmt.Sprintf("rcpt-%d", charges), Cents: c.Cents}, nil
	})

	req := cqrs.WithTenant(cqrs.WithRequestID(ctx, "req-7f3a"), "acme")
	for range 3 { // the request and two retries
		r, err := cqrs.Dispatch[Receipt](req, &bus, ChargeCard{OrderID: "o-1", Cents: 4200})
		fmt.Println(r.ID, r.Cents, err)
	}
	fmt.Println("charges:", charges)
	// Output:
	// rcpt-1 4200 <nil>
	// rcpt-1 4200 <nil>
	// rcpt-1 4200 <nil>
	// charges: 1
}

func ExampleHandleCommand() {
	var bus cqrs.Bus
	err := cqrs.HandleCommand(&bus, func(ctx context.Context, c ChargeCard) (Receipt, error) {
		return Receipt{ID: "rcpt-1", Cents: c.Cents}, nil
	})
	fmt.Println(err)
	// One handler per type.
	err = cqrs.HandleCommand(&bus, func(ctx context.Context, c ChargeCard) (Receipt, error) { return Receipt{}, nil })
	fmt.Println(errors.Is(err, cqrs.ErrDuplicateHandler))
	// Output:
	// <nil>
	// true
}

type GetBalance struct{ Account string }

func ExampleHandleQuery() {
	ctx := context.Background()
	idemp, _ := cqrs.NewIdempotency(cqrs.IdempotencyOptions{})
	defer idemp.Close(ctx)
	var bus cqrs.Bus
	_ = bus.Use(idemp)
	reads := 0
	_ = cqrs.HandleQuery(&bus, func(ctx context.Context, q GetBalance) (int, error) {
		reads++
		return 100, nil
	})
	// Queries pass the idempotency behaviour: they run every time, with or
	// without a request id.
	req := cqrs.WithRequestID(ctx, "req-1")
	for range 2 {
		_, _ = cqrs.Dispatch[int](req, &bus, GetBalance{Account: "a-1"})
	}
	fmt.Println("reads:", reads)
	// Output: reads: 2
}

func ExampleDispatch() {
	var bus cqrs.Bus
	_ = cqrs.HandleCommand(&bus, func(ctx context.Context, c ChargeCard) (Receipt, error) {
		return Receipt{ID: "rcpt-9", Cents: c.Cents}, nil
	})
	// The result type is named; the message type is inferred.
	r, err := cqrs.Dispatch[Receipt](context.Background(), &bus, ChargeCard{Cents: 990})
	fmt.Println(r, err)
	_, err = cqrs.Dispatch[string](context.Background(), &bus, ChargeCard{})
	fmt.Println(errors.Is(err, cqrs.ErrResultType))
	_, err = cqrs.Dispatch[int](context.Background(), &bus, GetBalance{})
	fmt.Println(errors.Is(err, cqrs.ErrNoHandler))
	// Output:
	// {rcpt-9 990} <nil>
	// true
	// true
}

func ExampleBus_Use() {
	var bus cqrs.Bus
	logging := cqrs.BehaviourFunc(func(ctx context.Context, msg *cqrs.Message, next cqrs.Next) (any, error) {
		fmt.Println("->", msg.Kind, msg.Name)
		res, err := next(ctx)
		fmt.Println("<-", res, err)
		return res, err
	})
	_ = bus.Use(logging)
	_ = cqrs.HandleCommand(&bus, func(ctx context.Context, c ChargeCard) (Receipt, error) {
		return Receipt{ID: "rcpt-1", Cents: c.Cents}, nil
	})
	_, _ = cqrs.Dispatch[Receipt](context.Background(), &bus, ChargeCard{Cents: 5})
	// Output:
	// -> command github.com/idemrt/idem/cqrs_test.ChargeCard
	// <- {rcpt-1 5} <nil>
}

func ExampleBehaviourFunc() {
	var bus cqrs.Bus
	// A behaviour may answer by itself, without calling next.
	validate := cqrs.BehaviourFunc(func(ctx context.Context, msg *cqrs.Message, next cqrs.Next) (any, error) {
		if c, ok := msg.Value.(ChargeCard); ok && c.Cents <= 0 {
			return nil, errors.New("amount must be positive")
		}
		return next(ctx)
	})
	_ = bus.Use(validate)
	_ = cqrs.HandleCommand(&bus, func(ctx context.Context, c ChargeCard) (Receipt, error) {
		return Receipt{ID: "rcpt-1", Cents: c.Cents}, nil
	})
	_, err := cqrs.Dispatch[Receipt](context.Background(), &bus, ChargeCard{Cents: -1})
	fmt.Println(err)
	// Output: amount must be positive
}

func ExampleNewIdempotency() {
	ctx := context.Background()
	idemp, err := cqrs.NewIdempotency(cqrs.IdempotencyOptions{})
	if err != nil {
		panic(err)
	}
	defer idemp.Close(ctx)
	var bus cqrs.Bus
	_ = bus.Use(idemp)
	_ = cqrs.HandleCommand(&bus, func(ctx context.Context, c ChargeCard) (Receipt, error) {
		return Receipt{}, nil
	})
	// A command without a request id does not run.
	_, err = cqrs.Dispatch[Receipt](ctx, &bus, ChargeCard{})
	fmt.Println(errors.Is(err, cqrs.ErrNoRequestID))

	_, err = cqrs.NewIdempotency(cqrs.IdempotencyOptions{LockTTL: -1})
	fmt.Println(errors.Is(err, idem.ErrInvalidArgument))
	// Output:
	// true
	// true
}

// Two service instances share a store (in production, store/redisstore): a
// command processed by one is replayed by the other, and while one holds a
// command's lock the other fails fast with a conflict.
func ExampleIdempotencyOptions() {
	ctx := context.Background()
	shared := memstore.New(memstore.Options{})
	defer shared.Close()
	newInstance := func(name string, started, release chan struct{}) (*cqrs.Bus, func()) {
		rt := idem.Must(idem.New(idem.Options{Store: shared}))
		idemp, _ := cqrs.NewIdempotency(cqrs.IdempotencyOptions{Runtime: rt})
		var bus cqrs.Bus
		_ = bus.Use(idemp)
		_ = cqrs.HandleCommand(&bus, func(ctx context.Context, c ChargeCard) (Receipt, error) {
			if started != nil {
				close(started)
				<-release
			}
			return Receipt{ID: "charged by " + name, Cents: c.Cents}, nil
		})
		return &bus, func() { _ = idemp.Close(ctx); _ = rt.Close(ctx) }
	}
	started, release := make(chan struct{}), make(chan struct{})
	a, closeA := newInstance("A", started, release)
	defer closeA()
	b, closeB := newInstance("B", nil, nil)
	defer closeB()

	req := cqrs.WithRequestID(ctx, "req-1")
	done := make(chan Receipt)
	go func() {
		r, _ := cqrs.Dispatch[Receipt](req, a, ChargeCard{Cents: 100})
		done <- r
	}()
	<-started
	_, err := cqrs.Dispatch[Receipt](req, b, ChargeCard{Cents: 100})
	fmt.Println("B while A runs:", errors.Is(err, idem.ErrConflict))
	close(release)
	fmt.Println("A:", (<-done).ID)
	r, err := cqrs.Dispatch[Receipt](req, b, ChargeCard{Cents: 100})
	fmt.Println("B later:", r.ID, err)
	// Output:
	// B while A runs: true
	// A: charged by A
	// B later: charged by A <nil>
}

func ExampleIdempotency_Close() {
	idemp, _ := cqrs.NewIdempotency(cqrs.IdempotencyOptions{})
	var bus cqrs.Bus
	_ = bus.Use(idemp)
	_ = cqrs.HandleCommand(&bus, func(ctx context.Context, c ChargeCard) (Receipt, error) { return Receipt{}, nil })
	fmt.Println(idemp.Close(context.Background()))
	_, err := cqrs.Dispatch[Receipt](cqrs.WithRequestID(context.Background(), "r"), &bus, ChargeCard{})
	fmt.Println(errors.Is(err, idem.ErrClosed))
	// Output:
	// <nil>
	// true
}

func ExampleIdempotency_Handle() {
	ctx := context.Background()
	idemp, _ := cqrs.NewIdempotency(cqrs.IdempotencyOptions{})
	defer idemp.Close(ctx)
	// The bus calls Handle; a behaviour of your own can too, to make its
	// own steps part of the idempotent run.
	audit := cqrs.BehaviourFunc(func(ctx context.Context, msg *cqrs.Message, next cqrs.Next) (any, error) {
		return idemp.Handle(ctx, msg, func(ctx context.Context) (any, error) {
			fmt.Println("audit: running", msg.Name)
			return next(ctx)
		})
	})
	var bus cqrs.Bus
	_ = bus.Use(audit)
	_ = cqrs.HandleCommand(&bus, func(ctx context.Context, c ChargeCard) (Receipt, error) { return Receipt{ID: "r"}, nil })
	req := cqrs.WithRequestID(ctx, "req-1")
	for range 2 {
		r, err := cqrs.Dispatch[Receipt](req, &bus, ChargeCard{})
		fmt.Println(r.ID, err)
	}
	// Output:
	// audit: running github.com/idemrt/idem/cqrs_test.ChargeCard
	// r <nil>
	// r <nil>
}

func ExampleWithRequestID() {
	ctx := cqrs.WithRequestID(context.Background(), "req-7f3a")
	id, ok := cqrs.RequestID(ctx)
	fmt.Println(id, ok)
	_, ok = cqrs.RequestID(context.Background())
	fmt.Println(ok)
	// Output:
	// req-7f3a true
	// false
}

func ExampleRequestID() {
	id, ok := cqrs.RequestID(cqrs.WithRequestID(context.Background(), ""))
	fmt.Printf("%q %v\n", id, ok) // an empty id is no id
	// Output: "" false
}

func ExampleWithTenant() {
	ctx := cqrs.WithTenant(context.Background(), "acme")
	tenant, ok := cqrs.Tenant(ctx)
	fmt.Println(tenant, ok)
	// Output: acme true
}

func ExampleTenant() {
	_, ok := cqrs.Tenant(context.Background())
	fmt.Println(ok)
	// Output: false
}

func ExampleContextFromHeaders() {
	// In an HTTP handler: ctx := cqrs.ContextFromHeaders(r.Context(), r.Header)
	h := http.Header{}
	h.Set("X-Request-Id", "req-42")
	h.Set("X-Tenant-Id", "acme")
	ctx := cqrs.ContextFromHeaders(context.Background(), h)
	id, _ := cqrs.RequestID(ctx)
	tenant, _ := cqrs.Tenant(ctx)
	fmt.Println(id, tenant)
	// Output: req-42 acme
}

func ExampleKey() {
	k, _ := cqrs.Key("acme", "req-1")
	fmt.Println(k)
	k, _ = cqrs.Key("", "req-1")
	fmt.Println(k)
	k, _ = cqrs.Key("a:b", "50%")
	fmt.Println(k)
	_, err := cqrs.Key("acme", "bad\x00id")
	fmt.Println(errors.Is(err, cqrs.ErrInvalidRequestID), errors.Is(err, idem.ErrInvalidKey))
	// Output:
	// idempotency_lock:tenant:acme:command:req-1
	// idempotency_lock:command:req-1
	// idempotency_lock:tenant:a%3Ab:command:50%25
	// true true
}

// A processed command is made to run again by forgetting its key.
func ExampleKey_forget() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	idemp, _ := cqrs.NewIdempotency(cqrs.IdempotencyOptions{Runtime: rt})
	var bus cqrs.Bus
	_ = bus.Use(idemp)
	runs := 0
	_ = cqrs.HandleCommand(&bus, func(ctx context.Context, c ChargeCard) (int, error) { runs++; return runs, nil })
	req := cqrs.WithRequestID(ctx, "req-1")
	a, _ := cqrs.Dispatch[int](req, &bus, ChargeCard{})
	key, _ := cqrs.Key("", "req-1")
	_ = rt.Forget(ctx, key)
	b, _ := cqrs.Dispatch[int](req, &bus, ChargeCard{})
	fmt.Println(a, b)
	// Output: 1 2
}

func ExampleKind() {
	fmt.Println(cqrs.Command, cqrs.Query)
	// Output: command query
}
