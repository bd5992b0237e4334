package flows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/flows"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// A run's and a step's result and state, read by the keys Run uses.

var errStolenCard = errors.New("stolen card")

func init() {
	if err := idem.RegisterError("flows_test.stolen_card", errStolenCard); err != nil {
		panic(err)
	}
}

func TestResultAndState(t *testing.T) {
	eachStore(t, func(t *testing.T, rt *idem.Runtime) {
		c := newCounter()
		f := checkout(t, c, nil)
		opts := flows.RunOptions[Order]{IdempotencyKey: "req-1", Namespace: "acme", Version: "v1"}
		if _, err := f.Result(bg, rt, "req-1", opts); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("before the run: %v", err)
		}
		if st, err := f.State(bg, rt, "req-1", opts); err != nil || st.Status != idem.KeyAbsent {
			t.Fatalf("state before the run: %+v %v", st, err)
		}
		out, err := f.Run(bg, rt, Order{Invoice: "inv-1"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.Result(bg, rt, "req-1", opts)
		if err != nil || got.Receipt != out.Receipt || !got.Charged {
			t.Fatalf("the run's result: %+v %v", got, err)
		}
		if st, err := f.State(bg, rt, "req-1", opts); err != nil || st.Status != idem.KeyCompleted ||
			st.Key != store.BuildKey("flow:checkout:req-1", store.Scope{Namespace: "acme", Version: "v1"}) {
			t.Fatalf("the run's state: %+v %v", st, err)
		}
		// Another scope is another key.
		if _, err := f.Result(bg, rt, "req-1", flows.RunOptions[Order]{Namespace: "globex"}); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("another tenant: %v", err)
		}
		step, err := f.StepResult(bg, rt, "charge", "charge:inv-1", opts)
		if err != nil || !step.Charged || step.Receipt != "" {
			t.Fatalf("the charge step's result: %+v %v", step, err)
		}
		if st, err := f.StepState(bg, rt, "receipt:inv-1", opts); err != nil || st.Status != idem.KeyCompleted {
			t.Fatalf("the receipt step's state: %+v %v", st, err)
		}
		// The receipt step's key read as the charge step's: another step.
		if _, err := f.StepResult(bg, rt, "charge", "receipt:inv-1", opts); !errors.Is(err, idem.ErrFingerprintMismatch) {
			t.Fatalf("another step's key: %v", err)
		}
		if c.get("charge") != 1 || c.get("receipt") != 1 {
			t.Fatalf("reading ran a step: %d charges, %d receipts", c.get("charge"), c.get("receipt"))
		}
	})
}

func TestResultInProgress(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	c := newCounter()
	g := idemtest.NewGate()
	f := checkout(t, c, func(ctx context.Context, o Order) (Order, error) {
		_, err := g.Fn("", nil)(ctx)
		o.Charged = true
		return o, err
	})
	opts := flows.RunOptions[Order]{IdempotencyKey: "req-2"}
	done := make(chan error, 1)
	go func() {
		_, err := f.Run(bg, rt, Order{Invoice: "inv-2"}, opts)
		done <- err
	}()
	<-g.Started
	if _, err := f.Result(bg, rt, "req-2", opts); !errors.Is(err, idem.ErrInProgress) {
		t.Fatalf("the run: %v, want ErrInProgress", err)
	}
	if st, err := f.State(bg, rt, "req-2", opts); err != nil || st.Status != idem.KeyInProgress || !st.HeldHere {
		t.Fatalf("the run's state: %+v %v", st, err)
	}
	if _, err := f.StepResult(bg, rt, "charge", "charge:inv-2", opts); !errors.Is(err, idem.ErrInProgress) {
		t.Fatalf("the step: %v, want ErrInProgress", err)
	}
	close(g.Open)
	if err := idemtest.Recv(t, done); err != nil {
		t.Fatal(err)
	}
}

// A run that failed permanently: Result gives the failure as Run gives it
// to a duplicate, on every instance, typed when its kind is registered.
func TestResultOfAFailedRun(t *testing.T) {
	check := func(t *testing.T, rt1, rt2 *idem.Runtime) {
		c := newCounter()
		f := declining(t, c, idem.Permanent(errStolenCard))
		opts := flows.RunOptions[Order]{IdempotencyKey: "req-3"}
		if _, err := f.Run(bg, rt1, Order{Invoice: "inv-3"}, opts); !errors.Is(err, errStolenCard) {
			t.Fatal(err)
		}
		for who, rt := range map[string]*idem.Runtime{"the instance that ran it": rt1, "another instance": rt2} {
			for what, get := range map[string]func() error{
				"Run": func() error { _, err := f.Run(bg, rt, Order{Invoice: "inv-3"}, opts); return err },
				"Result": func() error {
					_, err := f.Result(bg, rt, "req-3", opts)
					return err
				},
				"StepResult": func() error {
					_, err := f.StepResult(bg, rt, "charge", "charge:inv-3", opts)
					return err
				},
			} {
				err := get()
				var se *flows.StepError
				if !errors.As(err, &se) || se.Step != "charge" || !errors.Is(err, errStolenCard) || !idem.IsPermanent(err) {
					t.Errorf("%s, %s: %#v", who, what, err)
				}
			}
		}
		if c.get("charge") != 1 {
			t.Fatalf("charge ran %d times", c.get("charge"))
		}
	}
	t.Run("memory", func(t *testing.T) {
		rt1, rt2 := instances(t)
		check(t, rt1, rt2)
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t, redistest.Options{})
		rt1, _ := redisRuntime(t, srv.Addr)
		rt2, _ := redisRuntime(t, srv.Addr)
		check(t, rt1, rt2)
	})
}

func TestResultRefuses(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	f := checkout(t, newCounter(), nil)
	var o flows.RunOptions[Order]
	if _, err := f.Result(bg, rt, "", o); !errors.Is(err, flows.ErrInvalidFlow) {
		t.Fatalf("empty workflow key: %v", err)
	}
	if _, err := f.StepResult(bg, rt, "nope", "k", o); !errors.Is(err, flows.ErrInvalidFlow) {
		t.Fatalf("no such step: %v", err)
	}
	if _, err := f.StepState(bg, rt, "", o); !errors.Is(err, flows.ErrInvalidFlow) {
		t.Fatalf("empty step key: %v", err)
	}
	if _, err := f.State(bg, rt, "a\x00b", o); !errors.Is(err, idem.ErrInvalidKey) {
		t.Fatalf("NUL in the key: %v", err)
	}
}

// A step waits for another run of its key for the runtime's settle time,
// not for as long as the context allows; FailFast does not wait.
func TestStepSettleIsBounded(t *testing.T) {
	clk := idemtest.FakeClock()
	rt := idemtest.Runtime(t, idem.Options{Store: memstore.New(memstore.Options{Clock: clk}), Clock: clk, Policy: idem.Policy{Settle: time.Second}})
	for _, failFast := range []bool{false, true} {
		g := idemtest.NewGate()
		holder := flows.Must(flows.New("holder", flows.Step("charge", func(ctx context.Context, o Order) (Order, error) {
			_, err := g.Fn("", nil)(ctx)
			return o, err
		}).Idempotent(chargeKey, flows.StepOptions{})))
		dup := flows.Must(flows.New("holder", flows.Step("charge", func(_ context.Context, o Order) (Order, error) {
			t.Error("the duplicate ran the step")
			return o, nil
		}).Idempotent(chargeKey, flows.StepOptions{Policy: idem.Policy{FailFast: failFast}})))
		o := Order{Invoice: "inv-s"}
		if failFast {
			o.Invoice = "inv-f"
		}
		first := make(chan error, 1)
		go func() { _, err := holder.Run(bg, rt, o, flows.RunOptions[Order]{}); first <- err }()
		<-g.Started
		second := make(chan error, 1)
		go func() { _, err := dup.Run(bg, rt, o, flows.RunOptions[Order]{}); second <- err }() // a context without deadline
		if !failFast {
			idemtest.Eventually(t, "the duplicate parked", func() bool { return rt.Stats().Waiters == 1 })
			clk.Advance(time.Second)
		}
		if err := idemtest.Recv(t, second); !errors.Is(err, idem.ErrConflict) {
			t.Fatalf("fail fast %v: the duplicate step: %v, want ErrConflict", failFast, err)
		}
		close(g.Open)
		if err := idemtest.Recv(t, first); err != nil {
			t.Fatal(err)
		}
	}
	_, err := flows.New("f", flows.Step("s", func(_ context.Context, o Order) (Order, error) { return o, nil }).
		Idempotent(chargeKey, flows.StepOptions{Policy: idem.Policy{FailFast: true, Settle: time.Second}}))
	if !errors.Is(err, flows.ErrInvalidFlow) {
		t.Fatalf("FailFast and Settle: %v", err)
	}
}
