package flows_test

import (
	"context"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/flows"
	"github.com/idemrt/idem/internal/idemtest"
)

// What the runtime's cache keeps is a copy: neither the caller's input nor
// a later step's change to the state alters a replay.

// A step's result replayed from the cache is a copy: changing the state in
// a later step does not change what the next replay returns.
func TestReplaysAreCopies(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	f := flows.Must(flows.New("f",
		flows.Step("add", func(_ context.Context, o Order) (Order, error) {
			o.Items = append(o.Items, "a")
			return o, nil
		}).Idempotent(chargeKey, flows.StepOptions{}),
		flows.Step("mutate", func(_ context.Context, o Order) (Order, error) {
			o.Items[0] = "changed"
			return o, nil
		}),
	))
	for range 2 {
		out, err := f.Run(bg, rt, Order{Invoice: "i"}, flows.RunOptions[Order]{})
		if err != nil || len(out.Items) != 1 || out.Items[0] != "changed" {
			t.Fatalf("%+v %v", out, err)
		}
	}
	out, _ := flows.Must(flows.New("f", flows.Step("add", func(_ context.Context, o Order) (Order, error) {
		t.Error("replay expected")
		return o, nil
	}).Idempotent(chargeKey, flows.StepOptions{}))).Run(bg, rt, Order{Invoice: "i"}, flows.RunOptions[Order]{})
	if out.Items[0] != "a" {
		t.Fatalf("the stored step result was changed by a later step: %v", out.Items)
	}
}

type tagged struct {
	ID   string
	Tags map[string]string
}

// The value kept in the runtime's cache does not alias the caller's input:
// a caller that changes (or reuses) its input after Run does not change what
// later runs replay.
func TestCachedStateDoesNotAliasInput(t *testing.T) {
	tag := func(_ context.Context, s tagged) (tagged, error) {
		s.Tags["charged"] = "yes" // ordinary Go: the map is changed in place
		return s, nil
	}
	t.Run("step", func(t *testing.T) {
		rt := idemtest.Runtime(t, idem.Options{})
		f := flows.Must(flows.New("alias", flows.Step("tag", tag).
			Idempotent(func(s tagged) string { return "tag:" + s.ID }, flows.StepOptions{})))
		in := tagged{ID: "1", Tags: map[string]string{}}
		if _, err := f.Run(bg, rt, in, flows.RunOptions[tagged]{}); err != nil {
			t.Fatal(err)
		}
		in.Tags["charged"] = "tampered" // the caller reuses its input
		out, err := f.Run(bg, rt, tagged{ID: "1", Tags: map[string]string{}}, flows.RunOptions[tagged]{})
		if err != nil || out.Tags["charged"] != "yes" {
			t.Fatalf("replayed step state %+v, %v: the cached result aliases the first caller's input", out, err)
		}
	})
	t.Run("workflow", func(t *testing.T) {
		rt := idemtest.Runtime(t, idem.Options{})
		f := flows.Must(flows.New("alias", flows.Step("tag", tag)))
		in := tagged{ID: "1", Tags: map[string]string{}}
		opts := flows.RunOptions[tagged]{IdempotencyKey: "req-1"}
		if _, err := f.Run(bg, rt, in, opts); err != nil {
			t.Fatal(err)
		}
		in.Tags["charged"] = "tampered"
		out, err := f.Run(bg, rt, tagged{ID: "1", Tags: map[string]string{}}, opts)
		if err != nil || out.Tags["charged"] != "yes" {
			t.Fatalf("replayed workflow output %+v, %v: the cached output aliases the first caller's input", out, err)
		}
	})
}
