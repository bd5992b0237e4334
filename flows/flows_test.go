package flows_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/flows"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/redistest"
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
		idemtest.Eventually(t, "parked duplicates", func() bool { return rt.Stats().Waiters >= n-1 })
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
	_, err := f.Run(bg, rt, Order{Invoice: "inv"}, flows.RunOptions[Order]{IdempotencyKey: "k", Policy: idem.Policy{FailFast: true}})
	if !errors.Is(err, idem.ErrConflict) {
		t.Fatalf("duplicate with FailFast: %v, want ErrConflict", err)
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Duplicates of a run parked on its workflow key, filling MaxPending, do
// not starve the run: its steps' calls of idem.Do are part of the run,
// already admitted, and are not refused with ErrOverloaded.
func TestDuplicatesDoNotStarveOwnerStep(t *testing.T) {
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
	idemtest.Eventually(t, "the run in flight", func() bool { return rt.Stats().InFlight >= 1 })
	dups := make(chan error, 2)
	for range 2 {
		go func() { _, err := f.Run(bg, rt, Order{Invoice: "i"}, opts); dups <- err }()
	}
	idemtest.Eventually(t, "parked duplicates", func() bool { return rt.Stats().Waiters >= 2 })
	close(gate)
	err := <-first
	<-dups
	<-dups
	if err != nil {
		t.Fatalf("the run holding the key failed because its own duplicates filled the shard: %v (overloaded: %v)", err, errors.Is(err, idem.ErrOverloaded))
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
		idemtest.Eventually(t, "parked duplicates", func() bool { return rt.Stats().Waiters >= 1 })
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
