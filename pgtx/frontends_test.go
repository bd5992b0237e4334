package pgtx_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/cqrs"
	"github.com/idemrt/idem/flows"
	"github.com/idemrt/idem/pgtx"
)

// The front ends that docs/flows.md and docs/cqrs.md send to pgtx for
// work that is SQL: a plain flows step and a command handler each call
// pgtx.Do under a key of their own. Run again (a flow whose run key is new,
// so the step runs again; a command with another request id under the
// same business key), the work replays instead of writing twice, and the
// function holds its own claim.

type order struct {
	ID     string
	Charge int64
}

func TestFlowStepRunsItsSQLWithPgtx(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	var claims []idem.Claim
	f := flows.Must(flows.New("checkout",
		flows.Step("charge", func(ctx context.Context, o order) (order, error) {
			id, err := pgtx.Do(ctx, rt, e.work, "charge:"+o.ID, func(ctx context.Context, tx pgx.Tx) (int64, error) {
				c, _ := idem.ClaimFrom(ctx)
				claims = append(claims, c)
				return charge("charge:"+o.ID, runID())(ctx, tx)
			})
			o.Charge = id
			return o, err
		}),
	))
	a, err := f.Run(bg, rt, order{ID: "o-1"}, flows.RunOptions[order]{IdempotencyKey: "run-1"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.Run(bg, rt, order{ID: "o-1"}, flows.RunOptions[order]{IdempotencyKey: "run-2"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Charge == 0 || b.Charge != a.Charge {
		t.Fatalf("charges %d then %d, want the first replayed", a.Charge, b.Charge)
	}
	e.wantRows(t, "charge:o-1", 1)
	if len(claims) != 1 || claims[0].Key != "charge:o-1" || claims[0].Attempt != 1 || claims[0].Fence == 0 {
		t.Fatalf("claims %+v, want one, of the step's own key", claims)
	}
}

type placeOrder struct{ OrderID string }

func TestCommandHandlerRunsItsSQLWithPgtx(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	p, err := cqrs.NewIdempotency(cqrs.IdempotencyOptions{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(bg) })
	var bus cqrs.Bus
	if err := bus.Use(p); err != nil {
		t.Fatal(err)
	}
	runs := 0
	if err := cqrs.HandleCommand(&bus, func(ctx context.Context, cmd placeOrder) (int64, error) {
		return pgtx.Do(ctx, rt, e.work, "order:"+cmd.OrderID, func(ctx context.Context, tx pgx.Tx) (int64, error) {
			runs++
			return charge("order:"+cmd.OrderID, runID())(ctx, tx)
		})
	}); err != nil {
		t.Fatal(err)
	}
	a, err := cqrs.Dispatch[int64](cqrs.WithRequestID(bg, "req-1"), &bus, placeOrder{OrderID: "o-1"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := cqrs.Dispatch[int64](cqrs.WithRequestID(bg, "req-2"), &bus, placeOrder{OrderID: "o-1"})
	if err != nil {
		t.Fatal(err)
	}
	if a == 0 || b != a || runs != 1 {
		t.Fatalf("ids %d then %d, fn ran %d times; want one run replayed", a, b, runs)
	}
	e.wantRows(t, "order:o-1", 1)
}
