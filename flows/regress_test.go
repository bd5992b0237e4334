package flows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/flows"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store/memstore"
)

// A typed nil reduce step must be refused with ErrInvalidFlow, like a typed
// nil *StepDef; New panics instead.
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

// Two different flows with different workflow keys must not share a key:
// "flow:"+name+":"+key is ambiguous when a flow name holds ':'.
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

type tagged struct {
	ID   string
	Tags map[string]string
}

// The value kept in the runtime's cache must not alias the caller's input:
// a caller that changes (or reuses) its input after Run must not change what
// later runs replay.
func TestCachedStateAliasesInput(t *testing.T) {
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

// A reduce step stores the whole state after each item. Two items with the
// same key (here the third repeats the first) make the replay roll the state
// back to the snapshot after item 0, losing item 1's effect on the state
// although item 1's side effect happened.
func TestReduceRepeatedKeyRollsBackState(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	f := flows.Must(flows.New("refunds",
		flows.Reduce("refund", func(o Order) []string { return o.Items },
			func(_ context.Context, o Order, item string) (Order, error) {
				o.Refunded = append(o.Refunded, item)
				return o, nil
			}).Idempotent(func(o Order, item string) string { return "refund:" + o.Invoice + ":" + item }, flows.StepOptions{}),
	))
	out, err := f.Run(bg, rt, Order{Invoice: "i", Items: []string{"a", "b", "a"}}, flows.RunOptions[Order]{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range out.Refunded {
		found = found || r == "b"
	}
	if !found {
		t.Fatalf("state after the reduce: Refunded=%v; item b was refunded but the state lost it", out.Refunded)
	}
}

// A permanent step error replayed by another instance (a runtime that shares
// the store but not the LRU) is still a permanent *flows.StepError naming
// the step, with the original message (the error value itself cannot cross
// processes: errors.Is works on it only where it was made).
func TestPermanentErrorReplayedElsewhere(t *testing.T) {
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	rt1 := idemtest.Runtime(t, idem.Options{Store: st})
	rt2 := idemtest.Runtime(t, idem.Options{Store: st})
	c := newCounter()
	f := checkout(t, c, func(_ context.Context, o Order) (Order, error) {
		c.add("charge")
		return o, idem.Permanent(errDeclined)
	})
	opts := flows.RunOptions[Order]{IdempotencyKey: "req-1"}
	if _, err := f.Run(bg, rt1, Order{Invoice: "inv-p"}, opts); !errors.Is(err, errDeclined) {
		t.Fatal(err)
	}
	_, err := f.Run(bg, rt2, Order{Invoice: "inv-p"}, opts)
	var se *flows.StepError
	var re *idem.ReplayedError
	if !idem.IsPermanent(err) || !errors.As(err, &se) || se.Step != "charge" || se.Flow != "checkout" ||
		!errors.As(err, &re) || re.Message != errDeclined.Error() {
		t.Fatalf("replay on another instance: %T %v", err, err)
	}
	if c.get("charge") != 1 {
		t.Fatalf("charge ran %d times", c.get("charge"))
	}
}

// A step's idem.Do is admitted against the same MaxPending as the workflow
// duplicates parked on the run: duplicates of a run starve the run itself,
// whose step fails with ErrOverloaded (and the whole run with it).
func TestDuplicatesStarveOwnerStep(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{Shards: 1, MaxPending: 3})
	gate := make(chan struct{})
	f := flows.Must(flows.New("f",
		flows.Step("prepare", func(_ context.Context, o Order) (Order, error) { <-gate; return o, nil }),
		flows.Step("charge", func(_ context.Context, o Order) (Order, error) { o.Charged = true; return o, nil }).
			Idempotent(chargeKey, flows.StepOptions{}),
	))
	opts := flows.RunOptions[Order]{IdempotencyKey: "req-1"}
	first := make(chan error, 1)
	go func() { _, err := f.Run(bg, rt, Order{Invoice: "i"}, opts); first <- err }()
	for rt.Stats().InFlight < 1 {
		time.Sleep(time.Millisecond)
	}
	dups := make(chan error, 2)
	for range 2 {
		go func() { _, err := f.Run(bg, rt, Order{Invoice: "i"}, opts); dups <- err }()
	}
	for rt.Stats().Waiters < 2 {
		time.Sleep(time.Millisecond)
	}
	close(gate)
	err := <-first
	<-dups
	<-dups
	if err != nil {
		t.Fatalf("the run holding the key failed because its own duplicates filled the shard: %v (overloaded: %v)", err, errors.Is(err, idem.ErrOverloaded))
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

// Flow is documented as immutable, and New checks hooks and key functions;
// but New keeps the caller's *StepDef, so configuring the step afterwards
// changes the flow and bypasses the checks (a nil hook then panics in Run).
func TestFlowNotImmutable(t *testing.T) {
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

// Issue 5: "idem.Permanent(err) / a classifier option decide ...
// IsPermanent(err) to test". An error the Classifier made permanent is stored
// and replayed (the step does not run again), yet IsPermanent reports false
// for it in this process, and true for the same replay on another instance.
func TestClassifiedPermanentIsPermanent(t *testing.T) {
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	rt1 := idemtest.Runtime(t, idem.Options{Store: st})
	rt2 := idemtest.Runtime(t, idem.Options{Store: st})
	c := newCounter()
	f := checkout(t, c, func(_ context.Context, o Order) (Order, error) {
		c.add("charge")
		return o, errDeclined
	})
	opts := flows.RunOptions[Order]{IdempotencyKey: "req-c", Classifier: func(err error) bool { return errors.Is(err, errDeclined) }}
	_, err1 := f.Run(bg, rt1, Order{Invoice: "inv-c"}, opts)
	_, err2 := f.Run(bg, rt1, Order{Invoice: "inv-c"}, opts)
	_, err3 := f.Run(bg, rt2, Order{Invoice: "inv-c"}, opts)
	if c.get("charge") != 1 {
		t.Fatalf("charge ran %d times", c.get("charge"))
	}
	if !idem.IsPermanent(err1) || !idem.IsPermanent(err2) || !idem.IsPermanent(err3) {
		t.Fatalf("IsPermanent: first run %v, replay here %v, replay on another instance %v; the decline was stored as permanent",
			idem.IsPermanent(err1), idem.IsPermanent(err2), idem.IsPermanent(err3))
	}
}
