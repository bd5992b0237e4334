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
	"github.com/idemrt/idem/store/memstore"
)

// A step's policy resolves step → run → runtime → built-in default, field
// by field; the run's workflow key, run → runtime → default.

// keptFor is how long the key's result is kept, from its state.
func keptFor(t *testing.T, st idem.KeyState, err error) time.Duration {
	t.Helper()
	if err != nil || st.Status != idem.KeyCompleted {
		t.Fatalf("state: %+v %v", st, err)
	}
	return st.ExpiresAt.Sub(st.CreatedAt)
}

func TestPolicyTTLResolves(t *testing.T) {
	clk := idemtest.FakeClock()
	plain := idemtest.Runtime(t, idem.Options{Store: memstore.New(memstore.Options{Clock: clk}), Clock: clk})
	tuned := idemtest.Runtime(t, idem.Options{Store: memstore.New(memstore.Options{Clock: clk}), Clock: clk,
		Policy: idem.Policy{TTL: time.Hour}})
	pass := func(_ context.Context, o Order) (Order, error) { return o, nil }
	f := flows.Must(flows.New("ttl",
		flows.Step("own", pass).Idempotent(chargeKey, flows.StepOptions{Policy: idem.Policy{TTL: time.Minute}}),
		flows.Step("inherits", pass).Idempotent(receiptKey, flows.StepOptions{})))
	for _, c := range []struct {
		name   string
		rt     *idem.Runtime
		run    idem.Policy
		runTTL time.Duration // the workflow key's and the inheriting step's
		ownTTL time.Duration // the step that sets its own
	}{
		{"built-in", plain, idem.Policy{}, 24 * time.Hour, time.Minute},
		{"runtime's", tuned, idem.Policy{}, time.Hour, time.Minute},
		{"run's", tuned, idem.Policy{TTL: 2 * time.Hour}, 2 * time.Hour, time.Minute},
	} {
		opts := flows.RunOptions[Order]{IdempotencyKey: "run:" + c.name, Policy: c.run}
		o := Order{Invoice: c.name}
		if _, err := f.Run(bg, c.rt, o, opts); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		st, err := f.State(bg, c.rt, "run:"+c.name, opts)
		if got := keptFor(t, st, err); got != c.runTTL {
			t.Errorf("%s: the run is kept %v, want %v", c.name, got, c.runTTL)
		}
		st, err = f.StepState(bg, c.rt, receiptKey(o), opts)
		if got := keptFor(t, st, err); got != c.runTTL {
			t.Errorf("%s: the inheriting step is kept %v, want %v", c.name, got, c.runTTL)
		}
		st, err = f.StepState(bg, c.rt, chargeKey(o), opts)
		if got := keptFor(t, st, err); got != c.ownTTL {
			t.Errorf("%s: the step with a TTL of its own is kept %v, want %v", c.name, got, c.ownTTL)
		}
	}
}

// A step whose key another run holds waits or fails fast: the step's
// choice, else the run's, else the runtime's.
func TestPolicyStepWaitResolves(t *testing.T) {
	failFast := idemtest.Runtime(t, idem.Options{Policy: idem.Policy{FailFast: true}})
	waits := idemtest.Runtime(t, idem.Options{Policy: idem.Policy{Settle: time.Hour}})
	for _, c := range []struct {
		name string
		rt   *idem.Runtime
		step idem.Policy
		run  idem.Policy
		wait bool
	}{
		{"runtime waits", waits, idem.Policy{}, idem.Policy{}, true},
		{"runtime fails fast", failFast, idem.Policy{}, idem.Policy{}, false},
		{"run fails fast", waits, idem.Policy{}, idem.Policy{FailFast: true}, false},
		{"run waits", failFast, idem.Policy{}, idem.Policy{Settle: time.Hour}, true},
		{"step waits, run fails fast", failFast, idem.Policy{Settle: time.Hour}, idem.Policy{FailFast: true}, true},
		{"step fails fast, run waits", waits, idem.Policy{FailFast: true}, idem.Policy{Settle: time.Hour}, false},
	} {
		g := idemtest.NewGate()
		runs := 0
		f := flows.Must(flows.New("wait", flows.Step("charge", func(ctx context.Context, o Order) (Order, error) {
			runs++
			if runs == 1 {
				_, err := g.Fn("", nil)(ctx)
				o.Charged = true
				return o, err
			}
			t.Errorf("%s: the duplicate ran the step", c.name)
			return o, nil
		}).Idempotent(chargeKey, flows.StepOptions{Policy: c.step})))
		o := Order{Invoice: c.name}
		first := make(chan error, 1)
		go func() { _, err := f.Run(bg, c.rt, o, flows.RunOptions[Order]{Policy: c.run}); first <- err }()
		<-g.Started
		second := make(chan error, 1)
		var out Order
		go func() {
			var err error
			out, err = f.Run(bg, c.rt, o, flows.RunOptions[Order]{Policy: c.run})
			second <- err
		}()
		if c.wait {
			idemtest.Eventually(t, "the duplicate parked", func() bool { return c.rt.Stats().Waiters == 1 })
			close(g.Open)
			if err := idemtest.Recv(t, second); err != nil || !out.Charged {
				t.Errorf("%s: the duplicate: %+v %v; want the first run's state", c.name, out, err)
			}
		} else {
			if err := idemtest.Recv(t, second); !errors.Is(err, idem.ErrConflict) {
				t.Errorf("%s: the duplicate: %v; want ErrConflict at once", c.name, err)
			}
			close(g.Open)
		}
		if err := idemtest.Recv(t, first); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
}

// A step's classifier, else the run's, decides which of its errors are
// kept.
func TestPolicyStepClassifier(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	errDeclined := errors.New("declined")
	isDeclined := func(err error) bool { return errors.Is(err, errDeclined) }
	for _, c := range []struct {
		name      string
		step, run idem.Policy
		permanent bool
	}{
		{"none", idem.Policy{}, idem.Policy{}, false},
		{"run's", idem.Policy{}, idem.Policy{Classifier: isDeclined}, true},
		{"step's", idem.Policy{Classifier: isDeclined}, idem.Policy{}, true},
		{"step's over the run's", idem.Policy{Classifier: func(error) bool { return false }}, idem.Policy{Classifier: isDeclined}, false},
	} {
		runs := 0
		f := flows.Must(flows.New("classify", flows.Step("charge", func(context.Context, Order) (Order, error) {
			runs++
			return Order{}, errDeclined
		}).Idempotent(chargeKey, flows.StepOptions{Policy: c.step})))
		for range 2 {
			_, err := f.Run(bg, rt, Order{Invoice: c.name}, flows.RunOptions[Order]{Policy: c.run})
			if !errors.Is(err, errDeclined) || idem.IsPermanent(err) != c.permanent {
				t.Errorf("%s: %v (permanent %v), want permanent %v", c.name, err, idem.IsPermanent(err), c.permanent)
			}
		}
		want := 2
		if c.permanent {
			want = 1 // the second run gets the kept error
		}
		if runs != want {
			t.Errorf("%s: the step ran %d times, want %d", c.name, runs, want)
		}
	}
}

// A bad policy is refused before anything runs, naming the field.
func TestPolicyRefused(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	pass := func(_ context.Context, o Order) (Order, error) { return o, nil }
	f := flows.Must(flows.New("f", flows.Step("s", pass).Idempotent(chargeKey, flows.StepOptions{})))
	for _, c := range []struct {
		p    idem.Policy
		want string
	}{
		{idem.Policy{Settle: -time.Second}, `flow "f": RunOptions.Settle is -1s`},
		{idem.Policy{FailFast: true, Settle: time.Second}, `flow "f": RunOptions.FailFast is set, and so is Settle (1s)`},
	} {
		_, err := f.Run(bg, rt, Order{Invoice: "i"}, flows.RunOptions[Order]{Policy: c.p})
		if !errors.Is(err, flows.ErrInvalidFlow) || !strings.Contains(err.Error(), c.want) || strings.Count(err.Error(), "invalid argument") != 1 {
			t.Errorf("Run: %v, want ErrInvalidFlow saying %q", err, c.want)
		}
	}
	_, err := flows.New("f", flows.Step("s", pass).Idempotent(chargeKey, flows.StepOptions{Policy: idem.Policy{Lease: -time.Second}}))
	if want := `step "s": StepOptions.Lease is -1s`; !errors.Is(err, flows.ErrInvalidFlow) || !strings.Contains(err.Error(), want) {
		t.Errorf("New: %v, want ErrInvalidFlow saying %q", err, want)
	}
}
