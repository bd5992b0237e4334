package flows_test

import (
	"context"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/flows"
	"github.com/idemrt/idem/internal/idemtest"
)

// An idempotent step's function holds a claim of its own key.
func TestStepSeesItsClaim(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	var c idem.Claim
	var ok bool
	f := flows.Must(flows.New("checkout",
		flows.Step("charge", func(ctx context.Context, inv Invoice) (Invoice, error) {
			c, ok = idem.ClaimFrom(ctx)
			return inv, nil
		}).Idempotent(func(inv Invoice) string { return "charge:" + inv.ID }, flows.StepOptions{}),
	))
	if _, err := f.Run(context.Background(), rt, Invoice{ID: "inv-1"}, flows.RunOptions[Invoice]{}); err != nil {
		t.Fatal(err)
	}
	if !ok || c.Fence == 0 || c.Attempt != 1 || c.Key == "" {
		t.Fatalf("step claim = %+v (%v), want a claim with a fence at attempt 1", c, ok)
	}
}
