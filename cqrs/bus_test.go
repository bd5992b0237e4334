package cqrs_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/cqrs"
)

func TestDispatch(t *testing.T) {
	var bus cqrs.Bus
	if err := cqrs.HandleCommand(&bus, func(ctx context.Context, c PlaceOrder) (Order, error) {
		return Order{ID: "o1", SKU: c.SKU, Qty: c.Qty}, nil
	}); err != nil {
		t.Fatal(err)
	}
	o, err := cqrs.Dispatch[Order](bg, &bus, PlaceOrder{SKU: "book", Qty: 2})
	if err != nil || o != (Order{ID: "o1", SKU: "book", Qty: 2}) {
		t.Fatalf("Dispatch = %+v, %v", o, err)
	}
	// A message held in an interface is routed by its dynamic type.
	var msg any = PlaceOrder{SKU: "pen"}
	if o, err := cqrs.Dispatch[Order](bg, &bus, msg); err != nil || o.SKU != "pen" {
		t.Fatalf("Dispatch(any) = %+v, %v", o, err)
	}
}

func TestPointerMessages(t *testing.T) {
	var bus cqrs.Bus
	if err := cqrs.HandleCommand(&bus, func(ctx context.Context, c *PlaceOrder) (*Order, error) {
		return &Order{SKU: c.SKU}, nil
	}); err != nil {
		t.Fatal(err)
	}
	o, err := cqrs.Dispatch[*Order](bg, &bus, &PlaceOrder{SKU: "x"})
	if err != nil || o.SKU != "x" {
		t.Fatalf("Dispatch = %+v, %v", o, err)
	}
	// PlaceOrder (not a pointer) has no handler.
	if _, err := cqrs.Dispatch[*Order](bg, &bus, PlaceOrder{}); !errors.Is(err, cqrs.ErrNoHandler) {
		t.Fatalf("value message: %v, want ErrNoHandler", err)
	}
}

func TestBusErrors(t *testing.T) {
	var bus cqrs.Bus
	h := func(ctx context.Context, c PlaceOrder) (Order, error) { return Order{}, nil }
	if err := cqrs.HandleCommand(&bus, h); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err, want error, mention string) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", what, err, want)
		} else if !strings.Contains(err.Error(), mention) {
			t.Errorf("%s: %q does not mention %q", what, err, mention)
		}
	}
	check("second handler", cqrs.HandleCommand(&bus, h), cqrs.ErrDuplicateHandler, "cqrs_test.PlaceOrder")
	check("query of a command type", cqrs.HandleQuery(&bus, h), cqrs.ErrDuplicateHandler, "command handler")
	check("nil handler", cqrs.HandleCommand[CancelOrder, bool](&bus, nil), idem.ErrInvalidArgument, "nil handler")
	check("nil bus", cqrs.HandleCommand(nil, h), idem.ErrInvalidArgument, "nil *Bus")
	check("interface type", cqrs.HandleCommand(&bus, func(context.Context, any) (int, error) { return 0, nil }),
		idem.ErrInvalidArgument, "interface")
	check("nil behaviour", bus.Use(nil), idem.ErrInvalidArgument, "nil")
	check("Use on nil bus", (*cqrs.Bus)(nil).Use(), idem.ErrInvalidArgument, "nil *Bus")

	_, err := cqrs.Dispatch[Order](bg, &bus, CancelOrder{})
	check("no handler", err, cqrs.ErrNoHandler, "cqrs_test.CancelOrder")
	_, err = cqrs.Dispatch[string](bg, &bus, PlaceOrder{})
	check("wrong result type", err, cqrs.ErrResultType, "returns cqrs_test.Order")
	_, err = cqrs.Dispatch[Order](bg, nil, PlaceOrder{})
	check("nil bus", err, idem.ErrInvalidArgument, "nil *Bus")
	_, err = cqrs.Dispatch[Order, any](bg, &bus, nil)
	check("nil message", err, idem.ErrInvalidArgument, "nil message")

	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := cqrs.Dispatch[Order](ctx, &bus, PlaceOrder{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

// Behaviours wrap every message, the first added outermost; they see the
// message's kind and name; they can short-circuit.
func TestBehaviours(t *testing.T) {
	var bus cqrs.Bus
	var trace []string
	tracer := func(name string) cqrs.Behaviour {
		return cqrs.BehaviourFunc(func(ctx context.Context, msg *cqrs.Message, next cqrs.Next) (any, error) {
			trace = append(trace, name+">"+msg.Kind.String()+":"+msg.Name)
			res, err := next(ctx)
			trace = append(trace, "<"+name)
			return res, err
		})
	}
	if err := bus.Use(tracer("a"), tracer("b")); err != nil {
		t.Fatal(err)
	}
	_ = cqrs.HandleCommand(&bus, func(ctx context.Context, c PlaceOrder) (Order, error) {
		trace = append(trace, "handler")
		return Order{}, nil
	})
	_ = cqrs.HandleQuery(&bus, func(ctx context.Context, q GetOrder) (Order, error) { return Order{ID: q.OrderID}, nil })
	if _, err := cqrs.Dispatch[Order](bg, &bus, PlaceOrder{}); err != nil {
		t.Fatal(err)
	}
	want := "a>command:github.com/idemrt/idem/cqrs_test.PlaceOrder b>command:github.com/idemrt/idem/cqrs_test.PlaceOrder handler <b <a"
	if got := strings.Join(trace, " "); got != want {
		t.Fatalf("trace:\n%s\nwant\n%s", got, want)
	}
	trace = nil
	if o, err := cqrs.Dispatch[Order](bg, &bus, GetOrder{OrderID: "7"}); err != nil || o.ID != "7" {
		t.Fatalf("query: %+v %v", o, err)
	}
	if len(trace) != 4 || !strings.HasPrefix(trace[0], "a>query:") {
		t.Fatalf("query trace: %v", trace)
	}

	// A behaviour that answers by itself: nil is the zero result; a value
	// of another type is ErrResultType.
	var short cqrs.Bus
	var answer any
	_ = short.Use(cqrs.BehaviourFunc(func(context.Context, *cqrs.Message, cqrs.Next) (any, error) { return answer, nil }))
	_ = cqrs.HandleCommand(&short, func(ctx context.Context, c PlaceOrder) (Order, error) {
		t.Error("handler ran behind a short-circuit")
		return Order{}, nil
	})
	if o, err := cqrs.Dispatch[Order](bg, &short, PlaceOrder{}); err != nil || o != (Order{}) {
		t.Fatalf("nil answer: %+v %v", o, err)
	}
	answer = "not an order"
	if _, err := cqrs.Dispatch[Order](bg, &short, PlaceOrder{}); !errors.Is(err, cqrs.ErrResultType) {
		t.Fatalf("wrong answer type: %v", err)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[cqrs.Kind]string{cqrs.Command: "command", cqrs.Query: "query", 9: "Kind(9)"} {
		if k.String() != want {
			t.Errorf("%d: %q", k, k.String())
		}
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
