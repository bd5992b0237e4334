package flows_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/flows"
	"github.com/idemrt/idem/internal/idemtest"
)

// Every duration of StepOptions (at New) and RunOptions (at Run) is
// refused when negative or over store.MaxDuration (math.MaxInt64
// included), before any step runs.
func TestDurationBounds(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	ran := false
	step := func(_ context.Context, o Order) (Order, error) { ran = true; return o, nil }
	f := flows.Must(flows.New("f", flows.Step("a", step)))
	for _, d := range []time.Duration{math.MaxInt64, -time.Second} {
		for name, p := range map[string]idem.Policy{"Settle": {Settle: d}, "Lease": {Lease: d}, "TTL": {TTL: d}} {
			g, err := flows.New("g", flows.Step("a", step).Idempotent(chargeKey, flows.StepOptions{Policy: p}))
			if !errors.Is(err, flows.ErrInvalidFlow) || !errors.Is(err, idem.ErrInvalidArgument) || g != nil {
				t.Errorf("StepOptions.%s %v: %v", name, d, err)
			}
			if _, err := f.Run(bg, rt, Order{}, flows.RunOptions[Order]{IdempotencyKey: "k", Policy: p}); !errors.Is(err, idem.ErrInvalidArgument) {
				t.Errorf("RunOptions.%s %v: %v", name, d, err)
			}
		}
	}
	if ran {
		t.Fatal("a step ran")
	}
}
