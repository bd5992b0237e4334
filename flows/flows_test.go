package flows_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/flows"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
)

var bg = context.Background()

// Order is the state of the checkout flows in these tests.
type Order struct {
	Invoice  string
	Amount   int
	Charged  bool
	Receipt  string
	Items    []string
	Refunded []string
}

// counter counts executions by name.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func newCounter() *counter { return &counter{n: map[string]int{}} }

func (c *counter) add(name string) {
	c.mu.Lock()
	c.n[name]++
	c.mu.Unlock()
}

func (c *counter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

func chargeKey(o Order) string  { return "charge:" + o.Invoice }
func receiptKey(o Order) string { return "receipt:" + o.Invoice }

// checkout builds the charge + receipt flow; charge may be swapped.
func checkout(t testing.TB, c *counter, charge func(context.Context, Order) (Order, error)) *flows.Flow[Order] {
	if charge == nil {
		charge = func(_ context.Context, o Order) (Order, error) {
			c.add("charge")
			o.Charged = true
			return o, nil
		}
	}
	f, err := flows.New("checkout",
		flows.Step("charge", charge).Idempotent(chargeKey, flows.StepOptions{}),
		flows.Step("receipt", func(_ context.Context, o Order) (Order, error) {
			c.add("receipt")
			o.Receipt = "sent to buyer for " + o.Invoice
			return o, nil
		}).Idempotent(receiptKey, flows.StepOptions{}),
	)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// eachStore runs f on a runtime with the in-memory store and on one with
// the Redis store (a real redis-server).
func eachStore(t *testing.T, f func(t *testing.T, rt *idem.Runtime)) {
	t.Run("memory", func(t *testing.T) { f(t, idemtest.Runtime(t, idem.Options{})) })
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t, redistest.Options{})
		rt, _ := redisRuntime(t, srv.Addr)
		f(t, rt)
	})
}

func TestMain(m *testing.M) {
	if runWorker() {
		return
	}
	goleak.VerifyTestMain(m)
}

// Duplicate runs of one workflow key: each step executes once and every
// caller gets the same output.
func TestDuplicateRuns(t *testing.T) {
	eachStore(t, func(t *testing.T, rt *idem.Runtime) {
		c := newCounter()
		gate := make(chan struct{})
		f := checkout(t, c, func(_ context.Context, o Order) (Order, error) {
			c.add("charge")
			<-gate
			o.Charged = true
			return o, nil
		})
		const n = 30
		outs := make([]Order, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				outs[i], errs[i] = f.Run(bg, rt, Order{Invoice: "inv-1", Amount: 100}, flows.RunOptions[Order]{IdempotencyKey: "req-1"})
			})
		}
		for rt.Stats().Waiters < n-1 {
			time.Sleep(time.Millisecond)
		}
		close(gate)
		wg.Wait()
		for i := range n {
			if errs[i] != nil || !outs[i].Charged || outs[i].Receipt == "" {
				t.Fatalf("run %d: %+v %v", i, outs[i], errs[i])
			}
		}
		if c.get("charge") != 1 || c.get("receipt") != 1 {
			t.Fatalf("charge ran %d times, receipt %d", c.get("charge"), c.get("receipt"))
		}
		// A later run with the key runs nothing.
		out, err := f.Run(bg, rt, Order{Invoice: "inv-1"}, flows.RunOptions[Order]{IdempotencyKey: "req-1"})
		if err != nil || !out.Charged || out.Amount != 100 || c.get("charge") != 1 {
			t.Fatalf("second run: %+v %v (charge ran %d times)", out, err, c.get("charge"))
		}
	})
}

func TestFailFastDuplicate(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	c := newCounter()
	gate := make(chan struct{})
	started := make(chan struct{})
	f := checkout(t, c, func(_ context.Context, o Order) (Order, error) {
		close(started)
		<-gate
		return o, nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := f.Run(bg, rt, Order{Invoice: "inv"}, flows.RunOptions[Order]{IdempotencyKey: "k"})
		done <- err
	}()
	<-started
	_, err := f.Run(bg, rt, Order{Invoice: "inv"}, flows.RunOptions[Order]{IdempotencyKey: "k", FailFast: true})
	if !errors.Is(err, idem.ErrConflict) {
		t.Fatalf("duplicate with FailFast: %v, want ErrConflict", err)
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

var errGateway = errors.New("gateway timeout")
var errDeclined = errors.New("card declined")

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
		f := checkout(t, c, func(_ context.Context, o Order) (Order, error) {
			c.add("charge")
			return o, idem.Permanent(errDeclined)
		})
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
	f := checkout(t, c, func(_ context.Context, o Order) (Order, error) {
		c.add("charge")
		return o, errDeclined
	})
	opts := flows.RunOptions[Order]{Classifier: func(err error) bool { return errors.Is(err, errDeclined) }}
	for range 2 {
		if _, err := f.Run(bg, rt, Order{Invoice: "inv-c"}, opts); !errors.Is(err, errDeclined) {
			t.Fatal(err)
		}
	}
	if c.get("charge") != 1 {
		t.Fatalf("a classified-permanent decline ran %d times", c.get("charge"))
	}
}

// An OnAfter hook failure leaves the step claimable again, and a duplicate
// waiting on the step never sees a completed record for it: it runs the
// step itself.
func TestOnAfterFailureReleases(t *testing.T) {
	eachStore(t, func(t *testing.T, rt *idem.Runtime) {
		c := newCounter()
		inHook := make(chan struct{})
		release := make(chan struct{})
		var hookCalls atomic.Int32
		f, err := flows.New("checkout",
			flows.Step("charge", func(_ context.Context, o Order) (Order, error) {
				c.add("charge")
				o.Charged = true
				return o, nil
			}).Idempotent(chargeKey, flows.StepOptions{}).OnAfter(func(_ context.Context, o Order) error {
				if hookCalls.Add(1) == 1 {
					close(inHook)
					<-release
					return errors.New("ledger write failed")
				}
				return nil
			}),
		)
		if err != nil {
			t.Fatal(err)
		}
		first := make(chan error, 1)
		go func() {
			_, err := f.Run(bg, rt, Order{Invoice: "inv-h"}, flows.RunOptions[Order]{IdempotencyKey: "a"})
			first <- err
		}()
		<-inHook
		second := make(chan Order, 1)
		go func() {
			out, err := f.Run(bg, rt, Order{Invoice: "inv-h"}, flows.RunOptions[Order]{IdempotencyKey: "b"})
			if err != nil {
				t.Errorf("second run: %v", err)
			}
			second <- out
		}()
		for rt.Stats().Waiters < 1 {
			time.Sleep(time.Millisecond)
		}
		close(release)
		if err := <-first; err == nil || !strings.Contains(err.Error(), "ledger") {
			t.Fatalf("first run: %v", err)
		}
		if out := <-second; !out.Charged {
			t.Fatalf("second run: %+v", out)
		}
		if c.get("charge") != 2 || hookCalls.Load() != 2 {
			t.Fatalf("charge ran %d times, hook %d: the duplicate must have run the step itself", c.get("charge"), hookCalls.Load())
		}
	})
}

// Hooks run when the step executes, in order, and not on a replay.
func TestHooks(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	var log []string
	f, err := flows.New("f",
		flows.Step("s", func(_ context.Context, o Order) (Order, error) {
			log = append(log, "step")
			o.Charged = true
			return o, nil
		}).Idempotent(chargeKey, flows.StepOptions{}).
			OnBefore(func(_ context.Context, o Order) error { log = append(log, "before:"+fmt.Sprint(o.Charged)); return nil }).
			OnAfter(func(_ context.Context, o Order) error { log = append(log, "after:"+fmt.Sprint(o.Charged)); return nil }),
	)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := f.Run(bg, rt, Order{Invoice: "x"}, flows.RunOptions[Order]{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(log, ","); got != "before:false,step,after:true" {
		t.Fatalf("hooks: %s", got)
	}
	// An OnBefore error stops the step before it runs.
	g := flows.Must(flows.New("g", flows.Step("s", func(_ context.Context, o Order) (Order, error) {
		t.Error("step ran after its OnBefore failed")
		return o, nil
	}).OnBefore(func(context.Context, Order) error { return errors.New("not allowed") })))
	if _, err := g.Run(bg, rt, Order{}, flows.RunOptions[Order]{}); err == nil {
		t.Fatal("OnBefore error ignored")
	}
}

// Reduce over 100 items with a failure at item 57: the retry runs items
// 57-99 only.
func TestReduceRetryRunsRemainder(t *testing.T) {
	eachStore(t, func(t *testing.T, rt *idem.Runtime) {
		runs := make([]int, 100)
		failAt := 57
		f := flows.Must(flows.New("refunds",
			flows.Reduce("refund", func(o Order) []string { return o.Items },
				func(_ context.Context, o Order, item string) (Order, error) {
					var i int
					fmt.Sscanf(item, "item-%d", &i)
					runs[i]++
					if i == failAt {
						return o, errGateway
					}
					o.Refunded = append(o.Refunded, item)
					return o, nil
				}).Idempotent(func(o Order, item string) string { return "refund:" + o.Invoice + ":" + item }, flows.StepOptions{}),
		))
		in := Order{Invoice: "inv-r"}
		for i := range 100 {
			in.Items = append(in.Items, fmt.Sprint("item-", i))
		}
		_, err := f.Run(bg, rt, in, flows.RunOptions[Order]{IdempotencyKey: "refund-all"})
		var se *flows.StepError
		if !errors.As(err, &se) || se.Item != 57 || se.Step != "refund" {
			t.Fatalf("first run: %v", err)
		}
		failAt = -1
		out, err := f.Run(bg, rt, in, flows.RunOptions[Order]{IdempotencyKey: "refund-all"})
		if err != nil || len(out.Refunded) != 100 {
			t.Fatalf("retry: %d refunded, %v", len(out.Refunded), err)
		}
		for i, n := range runs {
			want := 1
			if i == 57 {
				want = 2
			}
			if n != want {
				t.Fatalf("item %d ran %d times, want %d", i, n, want)
			}
		}
	})
}

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
			return flows.New("f", flows.Step("a", ok).Idempotent(chargeKey, flows.StepOptions{TTL: -time.Second}))
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
		"negative":       {Settle: -time.Second},
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

var _ = store.BuildKey
