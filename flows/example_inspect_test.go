package flows_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/flows"
)

// checkoutFlow charges an invoice, once per invoice.
func checkoutFlow() *flows.Flow[Invoice] {
	return flows.Must(flows.New("checkout",
		flows.Step("charge", charge).
			Idempotent(func(inv Invoice) string { return "charge:" + inv.ID }, flows.StepOptions{}),
	))
}

func ExampleFlow_Result() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	f := checkoutFlow()
	opts := flows.RunOptions[Invoice]{IdempotencyKey: "request-7", Namespace: "tenant-a"}

	_, err := f.Result(ctx, rt, "request-7", opts)
	fmt.Println(errors.Is(err, idem.ErrNotFound))
	_, _ = f.Run(ctx, rt, Invoice{ID: "inv-7", Amount: 300}, opts)
	out, err := f.Result(ctx, rt, "request-7", opts) // no step runs
	fmt.Println(out.ID, out.Charged, err)
	// Output:
	// true
	// inv-7 true <nil>
}

func ExampleFlow_State() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	f := checkoutFlow()
	opts := flows.RunOptions[Invoice]{IdempotencyKey: "request-8"}
	_, _ = f.Run(ctx, rt, Invoice{ID: "inv-8"}, opts)
	st, err := f.State(ctx, rt, "request-8", opts)
	fmt.Println(st.Status, st.Key, err)
	// Output: completed ff:idemp:::flow:checkout:request-8 <nil>
}

func ExampleFlow_StepResult() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	f := checkoutFlow()
	_, _ = f.Run(ctx, rt, Invoice{ID: "inv-9"}, flows.RunOptions[Invoice]{}) // no workflow key
	// The step's key is what its key function returned.
	out, err := f.StepResult(ctx, rt, "charge", "charge:inv-9", flows.RunOptions[Invoice]{})
	fmt.Println(out.Charged, err)
	// Output: true <nil>
}

func ExampleFlow_StepState() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	f := checkoutFlow()
	st, _ := f.StepState(ctx, rt, "charge:inv-10", flows.RunOptions[Invoice]{})
	fmt.Println(st.Status)
	_, _ = f.Run(ctx, rt, Invoice{ID: "inv-10"}, flows.RunOptions[Invoice]{})
	st, _ = f.StepState(ctx, rt, "charge:inv-10", flows.RunOptions[Invoice]{})
	fmt.Println(st.Status)
	// Output:
	// absent
	// completed
}

// A step that must not wait for another run of its key: it fails at once
// with idem.ErrConflict while one holds the key.
func ExampleStepOptions() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	inner := flows.Must(flows.New("export", flows.Step("write", func(_ context.Context, inv Invoice) (Invoice, error) {
		return inv, nil
	}).Idempotent(func(inv Invoice) string { return "export:" + inv.ID }, flows.StepOptions{Policy: idem.Policy{FailFast: true}})))
	outer := flows.Must(flows.New("export", flows.Step("write", func(ctx context.Context, inv Invoice) (Invoice, error) {
		// A second run of the same step key while this one holds it.
		_, err := inner.Run(ctx, rt, inv, flows.RunOptions[Invoice]{})
		fmt.Println(errors.Is(err, idem.ErrConflict))
		return inv, nil
	}).Idempotent(func(inv Invoice) string { return "export:" + inv.ID }, flows.StepOptions{})))
	_, err := outer.Run(ctx, rt, Invoice{ID: "inv-11"}, flows.RunOptions[Invoice]{})
	fmt.Println(err)
	// Output:
	// true
	// <nil>
}
