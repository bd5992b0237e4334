package flows_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/flows"
)

type Invoice struct {
	ID       string
	Amount   int
	Charged  bool
	Receipt  string
	Lines    []string
	Refunded []string
}

func ExampleNew() {
	f, err := flows.New("checkout",
		flows.Step("charge", func(_ context.Context, inv Invoice) (Invoice, error) {
			inv.Charged = true
			return inv, nil
		}),
	)
	fmt.Println(f.Name(), err)
	_, err = flows.New("checkout", flows.Step("a", charge), flows.Step("a", charge))
	fmt.Println(errors.Is(err, flows.ErrInvalidFlow))
	// Output:
	// checkout <nil>
	// true
}

func charge(_ context.Context, inv Invoice) (Invoice, error) {
	inv.Charged = true
	return inv, nil
}

func ExampleStep() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	calls := 0
	f := flows.Must(flows.New("checkout",
		flows.Step("charge", func(_ context.Context, inv Invoice) (Invoice, error) {
			calls++
			inv.Charged = true
			return inv, nil
		}).Idempotent(func(inv Invoice) string { return "charge:" + inv.ID }, flows.StepOptions{}),
	))
	for range 3 { // three runs of the flow (no workflow key): the step runs once
		_, _ = f.Run(ctx, rt, Invoice{ID: "inv-1", Amount: 100}, flows.RunOptions[Invoice]{})
	}
	fmt.Println("charges:", calls)
	// Output: charges: 1
}

func ExampleStepDef_OnAfter() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	ledgerDown := true
	calls := 0
	f := flows.Must(flows.New("checkout",
		flows.Step("charge", func(_ context.Context, inv Invoice) (Invoice, error) {
			calls++
			inv.Charged = true
			return inv, nil
		}).Idempotent(func(inv Invoice) string { return "charge:" + inv.ID }, flows.StepOptions{}).
			OnAfter(func(context.Context, Invoice) error {
				if ledgerDown {
					return errors.New("ledger unavailable")
				}
				return nil
			}),
	))
	_, err := f.Run(ctx, rt, Invoice{ID: "inv-2"}, flows.RunOptions[Invoice]{})
	fmt.Println(err)
	ledgerDown = false // the step was not committed: the retry runs it again
	out, err := f.Run(ctx, rt, Invoice{ID: "inv-2"}, flows.RunOptions[Invoice]{})
	fmt.Println(out.Charged, err, "calls:", calls)
	// Output:
	// flows: checkout: step "charge": ledger unavailable
	// true <nil> calls: 2
}

func ExampleStepDef_OnBefore() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	f := flows.Must(flows.New("checkout",
		flows.Step("charge", charge).OnBefore(func(_ context.Context, inv Invoice) error {
			if inv.Amount <= 0 {
				return idem.Permanent(errors.New("nothing to charge"))
			}
			return nil
		}),
	))
	_, err := f.Run(ctx, rt, Invoice{ID: "inv-3"}, flows.RunOptions[Invoice]{})
	fmt.Println(err)
	// Output: flows: checkout: step "charge": nothing to charge
}

func ExampleReduce() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	failOn := "line-2"
	refund := flows.Must(flows.New("refunds",
		flows.Reduce("refund", func(inv Invoice) []string { return inv.Lines },
			func(_ context.Context, inv Invoice, line string) (Invoice, error) {
				if line == failOn {
					return inv, errors.New("gateway timeout")
				}
				fmt.Println("refunded", line)
				inv.Refunded = append(inv.Refunded, line)
				return inv, nil
			}).Idempotent(func(inv Invoice, line string) string { return "refund:" + inv.ID + ":" + line }, flows.StepOptions{}),
	))
	in := Invoice{ID: "inv-4", Lines: []string{"line-1", "line-2", "line-3"}}
	_, err := refund.Run(ctx, rt, in, flows.RunOptions[Invoice]{})
	fmt.Println(err)
	failOn = "" // the retry refunds only what is left
	out, err := refund.Run(ctx, rt, in, flows.RunOptions[Invoice]{})
	fmt.Println(out.Refunded, err)
	// Output:
	// refunded line-1
	// flows: refunds: step "refund", item 1: gateway timeout
	// refunded line-2
	// refunded line-3
	// [line-1 line-2 line-3] <nil>
}

func ExampleFlow_Run() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	runs := 0
	f := flows.Must(flows.New("checkout", flows.Step("charge", func(_ context.Context, inv Invoice) (Invoice, error) {
		runs++
		inv.Charged = true
		return inv, nil
	})))
	opts := flows.RunOptions[Invoice]{IdempotencyKey: "request-42", Namespace: "tenant-a", Version: "v1"}
	for range 2 { // a client retries the whole request
		out, err := f.Run(ctx, rt, Invoice{ID: "inv-5"}, opts)
		fmt.Println(out.Charged, err)
	}
	fmt.Println("runs:", runs)
	// Output:
	// true <nil>
	// true <nil>
	// runs: 1
}

func ExampleMust() {
	f := flows.Must(flows.New("noop", flows.Step("nothing", func(_ context.Context, inv Invoice) (Invoice, error) { return inv, nil })))
	fmt.Println(f.Name())
	// Output: noop
}
