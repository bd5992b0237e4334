package flows_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/flows"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store/memstore"
)

// Step failures: a transient one is retried, a permanent one (marked, or
// made so by the Classifier) is stored and replayed, here and on other
// instances.

var (
	errGateway  = errors.New("gateway timeout") // transient
	errDeclined = errors.New("card declined")   // permanent, when marked so
)

// A step retried after a transient failure executes again; the steps that
// completed before it are replayed.
func TestTransientStepRetried(t *testing.T) {
	eachStore(t, func(t *testing.T, rt *idem.Runtime) {
		c := newCounter()
		fail := true
		f, err := flows.New("checkout",
			flows.Step("charge", func(_ context.Context, o Order) (Order, error) {
				c.add("charge")
				o.Charged = true
				return o, nil
			}).Idempotent(chargeKey, flows.StepOptions{}),
			flows.Step("receipt", func(_ context.Context, o Order) (Order, error) {
				c.add("receipt")
				if fail {
					return o, errGateway
				}
				o.Receipt = "sent"
				return o, nil
			}).Idempotent(receiptKey, flows.StepOptions{}),
		)
		if err != nil {
			t.Fatal(err)
		}
		opts := flows.RunOptions[Order]{IdempotencyKey: "req-7"}
		_, err = f.Run(bg, rt, Order{Invoice: "inv-7"}, opts)
		var se *flows.StepError
		if !errors.Is(err, errGateway) || !errors.As(err, &se) || se.Step != "receipt" || se.Flow != "checkout" || idem.IsPermanent(err) {
			t.Fatalf("first run: %v", err)
		}
		fail = false
		out, err := f.Run(bg, rt, Order{Invoice: "inv-7"}, opts)
		if err != nil || out.Receipt != "sent" || !out.Charged {
			t.Fatalf("retry: %+v %v", out, err)
		}
		if c.get("charge") != 1 || c.get("receipt") != 2 {
			t.Fatalf("charge ran %d, receipt %d; want 1 and 2", c.get("charge"), c.get("receipt"))
		}
	})
}

// A permanent decline is stored: retries get it without calling the step,
// even under a new workflow key for the same invoice.
func TestPermanentStepReplayed(t *testing.T) {
	eachStore(t, func(t *testing.T, rt *idem.Runtime) {
		c := newCounter()
		f := declining(t, c, idem.Permanent(errDeclined))
		for _, key := range []string{"req-1", "req-1", "req-2"} {
			_, err := f.Run(bg, rt, Order{Invoice: "inv-9"}, flows.RunOptions[Order]{IdempotencyKey: key})
			if !errors.Is(err, errDeclined) || !idem.IsPermanent(err) {
				t.Fatalf("run %s: %v, want the permanent decline", key, err)
			}
		}
		if c.get("charge") != 1 || c.get("receipt") != 0 {
			t.Fatalf("charge ran %d times, receipt %d", c.get("charge"), c.get("receipt"))
		}
	})
}

func TestClassifier(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	c := newCounter()
	f := declining(t, c, errDeclined)
	opts := flows.RunOptions[Order]{Policy: idem.Policy{Classifier: func(err error) bool { return errors.Is(err, errDeclined) }}}
	for range 2 {
		if _, err := f.Run(bg, rt, Order{Invoice: "inv-c"}, opts); !errors.Is(err, errDeclined) {
			t.Fatal(err)
		}
	}
	if c.get("charge") != 1 {
		t.Fatalf("a classified-permanent decline ran %d times", c.get("charge"))
	}
}

// A permanent step error replayed by another instance (a runtime that shares
// the store but not the LRU) is still a permanent *flows.StepError naming
// the step, with the original message (the error value itself cannot cross
// processes: errors.Is works on it only where it was made).
func TestPermanentErrorReplayedElsewhere(t *testing.T) {
	rt1, rt2 := instances(t)
	c := newCounter()
	f := declining(t, c, idem.Permanent(errDeclined))
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

// An error the Classifier made permanent is stored and replayed (the step
// does not run again), and IsPermanent reports it permanent everywhere: to
// the run that made it, to a replay in this process, and to a replay on
// another instance.
func TestClassifiedPermanentIsPermanent(t *testing.T) {
	rt1, rt2 := instances(t)
	c := newCounter()
	f := declining(t, c, errDeclined)
	opts := flows.RunOptions[Order]{IdempotencyKey: "req-c", Policy: idem.Policy{Classifier: func(err error) bool { return errors.Is(err, errDeclined) }}}
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

// instances returns two runtimes that share an in-memory store but not
// their caches, as two instances of a service do.
func instances(t testing.TB) (*idem.Runtime, *idem.Runtime) {
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	return idemtest.Runtime(t, idem.Options{Store: st}), idemtest.Runtime(t, idem.Options{Store: st})
}

// declining returns the checkout flow whose charge step counts its runs in
// c and fails with err.
func declining(t testing.TB, c *counter, err error) *flows.Flow[Order] {
	return checkout(t, c, func(_ context.Context, o Order) (Order, error) {
		c.add("charge")
		return o, err
	})
}
