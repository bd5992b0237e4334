package flows_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/flows"
	"github.com/idemrt/idem/internal/idemtest"
)

// What New and Run refuse: bad flows, steps and options, and step keys
// found bad when their step is reached.

func TestBadInput(t *testing.T) {
	ok := func(_ context.Context, o Order) (Order, error) { return o, nil }
	var nilStep *flows.StepDef[Order]
	cases := map[string]func() (*flows.Flow[Order], error){
		"no name":        func() (*flows.Flow[Order], error) { return flows.New("", flows.Step("a", ok)) },
		"no steps":       func() (*flows.Flow[Order], error) { return flows.New[Order]("f") },
		"empty step":     func() (*flows.Flow[Order], error) { return flows.New("f", flows.Step("", ok)) },
		"duplicate step": func() (*flows.Flow[Order], error) { return flows.New("f", flows.Step("a", ok), flows.Step("a", ok)) },
		"nil step":       func() (*flows.Flow[Order], error) { return flows.New("f", flows.Step("a", ok), nil) },
		"typed nil step": func() (*flows.Flow[Order], error) { return flows.New[Order]("f", nilStep) },
		"nil fn":         func() (*flows.Flow[Order], error) { return flows.New("f", flows.Step[Order]("a", nil)) },
		"nil hook":       func() (*flows.Flow[Order], error) { return flows.New("f", flows.Step("a", ok).OnAfter(nil)) },
		"nil key": func() (*flows.Flow[Order], error) {
			return flows.New("f", flows.Step("a", ok).Idempotent(nil, flows.StepOptions{}))
		},
		"negative ttl": func() (*flows.Flow[Order], error) {
			return flows.New("f", flows.Step("a", ok).Idempotent(chargeKey, flows.StepOptions{Policy: idem.Policy{TTL: -time.Second}}))
		},
		"nil items": func() (*flows.Flow[Order], error) {
			return flows.New("f", flows.Reduce[Order, string]("r", nil, func(_ context.Context, o Order, _ string) (Order, error) { return o, nil }))
		},
		"reduce nil key": func() (*flows.Flow[Order], error) {
			return flows.New("f", flows.Reduce("r", func(o Order) []string { return o.Items },
				func(_ context.Context, o Order, _ string) (Order, error) { return o, nil }).Idempotent(nil, flows.StepOptions{}))
		},
	}
	for name, mk := range cases {
		f, err := mk()
		if !errors.Is(err, flows.ErrInvalidFlow) || !errors.Is(err, idem.ErrInvalidArgument) || f != nil {
			t.Errorf("%s: New = %v, %v; want ErrInvalidFlow", name, f, err)
		}
	}

	rt := idemtest.Runtime(t, idem.Options{})
	ran := false
	f := flows.Must(flows.New("f",
		flows.Step("a", func(_ context.Context, o Order) (Order, error) { ran = true; return o, nil }),
		flows.Step("b", ok).Idempotent(func(o Order) string { return o.Invoice }, flows.StepOptions{})))
	runCases := map[string]flows.RunOptions[Order]{
		"both keys":      {IdempotencyKey: "k", KeyFunc: func(Order) string { return "k" }},
		"empty key func": {KeyFunc: func(Order) string { return "" }},
		"nul key":        {IdempotencyKey: "a\x00b"},
		"long key":       {IdempotencyKey: strings.Repeat("k", 2000)},
		"negative":       {Policy: idem.Policy{Settle: -time.Second}},
	}
	for name, opts := range runCases {
		_, err := f.Run(bg, rt, Order{Invoice: "i"}, opts)
		if err == nil || !(errors.Is(err, idem.ErrInvalidArgument) || errors.Is(err, idem.ErrInvalidKey)) {
			t.Errorf("%s: Run = %v", name, err)
		}
		if ran {
			t.Fatalf("%s: a step ran before the error", name)
		}
	}
	// A step key function returning an empty or invalid key stops the run
	// at that step, before it runs.
	for _, inv := range []string{"", "bad\x00key", strings.Repeat("x", 1100)} {
		_, err := f.Run(bg, rt, Order{Invoice: inv}, flows.RunOptions[Order]{})
		var se *flows.StepError
		if !errors.As(err, &se) || se.Step != "b" || !(errors.Is(err, idem.ErrInvalidArgument) || errors.Is(err, idem.ErrInvalidKey)) {
			t.Errorf("step key %.10q: %v", inv, err)
		}
	}
	if _, err := f.Run(bg, nil, Order{}, flows.RunOptions[Order]{}); !errors.Is(err, flows.ErrInvalidFlow) {
		t.Errorf("nil runtime: %v", err)
	}
}

// A typed nil reduce step is refused with ErrInvalidFlow, like a typed nil
// *StepDef: New does not panic on it.
func TestTypedNilReduceStep(t *testing.T) {
	var r *flows.ReduceDef[Order, string]
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("New panicked on a typed nil reduce step: %v", p)
		}
	}()
	f, err := flows.New[Order]("f", r)
	if !errors.Is(err, flows.ErrInvalidFlow) || f != nil {
		t.Fatalf("New = %v, %v; want ErrInvalidFlow", f, err)
	}
}

// A step key depends on the state the earlier steps made, so a bad one is
// found when its step is reached: the run stops there with a *StepError,
// before that step runs (the earlier ones did, and are kept).
func TestBadStepKeyStopsAtItsStep(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	c := newCounter()
	f := flows.Must(flows.New("f",
		flows.Step("charge", func(_ context.Context, o Order) (Order, error) { c.add("charge"); return o, nil }).
			Idempotent(chargeKey, flows.StepOptions{}),
		flows.Step("receipt", func(_ context.Context, o Order) (Order, error) { c.add("receipt"); return o, nil }).
			Idempotent(func(Order) string { return "" }, flows.StepOptions{}),
	))
	_, err := f.Run(bg, rt, Order{Invoice: "i"}, flows.RunOptions[Order]{})
	var se *flows.StepError
	if !errors.As(err, &se) || se.Step != "receipt" || !errors.Is(err, idem.ErrInvalidArgument) || c.get("receipt") != 0 {
		t.Fatalf("a bad key of a later step: %v (receipt ran %d times)", err, c.get("receipt"))
	}
	if n := c.get("charge"); n != 1 {
		t.Fatalf("charge ran %d times", n)
	}
}

// A Flow is immutable: configuring a *StepDef after New (here with a nil
// hook, which New would refuse) does not change the flow, so Run neither
// skips New's checks nor panics.
func TestFlowImmutableAfterNew(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	st := flows.Step("s", func(_ context.Context, o Order) (Order, error) { return o, nil })
	f := flows.Must(flows.New("f", st))
	st.OnBefore(nil) // after New: never checked
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("Run panicked on a hook added after New: %v", p)
		}
	}()
	if _, err := f.Run(bg, rt, Order{}, flows.RunOptions[Order]{}); err != nil {
		t.Fatal(err)
	}
}
