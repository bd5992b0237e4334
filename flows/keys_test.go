package flows_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/flows"
	"github.com/idemrt/idem/internal/idemtest"
)

// Workflow and step keys: scoped by namespace, never shared by two flows or
// steps.

// Keys are scoped by namespace (tenants never share one), and a key
// reused by another step or flow is an error, not a merge.
func TestKeyScopes(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	c := newCounter()
	f := checkout(t, c, nil)
	for _, tenant := range []string{"tenant-a", "tenant-b"} {
		if _, err := f.Run(bg, rt, Order{Invoice: "inv-1"}, flows.RunOptions[Order]{IdempotencyKey: "req", Namespace: tenant}); err != nil {
			t.Fatal(err)
		}
	}
	if c.get("charge") != 2 {
		t.Fatalf("two tenants, same keys: charge ran %d times, want 2", c.get("charge"))
	}
	// Another flow whose step uses the charge step's key.
	other := flows.Must(flows.New("other", flows.Step("audit", func(_ context.Context, o Order) (Order, error) {
		t.Error("a step ran on another step's key")
		return o, nil
	}).Idempotent(chargeKey, flows.StepOptions{})))
	_, err := other.Run(bg, rt, Order{Invoice: "inv-1"}, flows.RunOptions[Order]{Namespace: "tenant-a"})
	if !errors.Is(err, idem.ErrFingerprintMismatch) {
		t.Fatalf("key reused by another flow's step: %v, want ErrFingerprintMismatch", err)
	}
}

// Two flows whose names and workflow keys join to the same text
// ("billing:checkout" with "req-1", "billing" with "checkout:req-1") do not
// share a key, although the names hold ':'.
func TestFlowNameKeyCollision(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	ok := func(_ context.Context, o Order) (Order, error) { o.Charged = true; return o, nil }
	f1 := flows.Must(flows.New("billing:checkout", flows.Step("s", ok)))
	f2 := flows.Must(flows.New("billing", flows.Step("s", ok)))
	if _, err := f1.Run(bg, rt, Order{}, flows.RunOptions[Order]{IdempotencyKey: "req-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f2.Run(bg, rt, Order{}, flows.RunOptions[Order]{IdempotencyKey: "checkout:req-1"}); err != nil {
		t.Fatalf("flow %q key %q collides with flow %q key %q: %v", "billing", "checkout:req-1", "billing:checkout", "req-1", err)
	}
}
