// Package idemtest holds the test helpers the packages of this module
// share: a runtime closed at the end of the test, calls of Do run in a
// goroutine, functions and handlers that stop where the test wants them,
// and bounded waits. Every wait fails the test after [Timeout].
package idemtest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/clock"
)

// Timeout is how long every helper here waits before it fails the test:
// long enough for a loaded machine running the race detector.
const Timeout = 20 * time.Second

// Epoch is where the fake clocks of the tests start.
var Epoch = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// FakeClock returns a fake clock reading Epoch.
func FakeClock() *clock.Fake { return clock.NewFake(Epoch) }

// Runtime starts a runtime with opts that the test closes at its end,
// failing the test if Close does not finish within Timeout.
func Runtime(t testing.TB, opts idem.Options) *idem.Runtime {
	t.Helper()
	rt, err := idem.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("runtime Close: %v", err)
		}
	})
	return rt
}

// Eventually waits until cond holds, failing the test after Timeout. Use it
// for a state with no event to wait on (a count in rt.Stats(), a metric);
// an event on a channel is better waited for with Recv.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond) // the poll interval: cond has no event to wait on
	}
}

// AdvanceUntil moves clk forward by d, then waits until cond holds. While it
// waits it fires the timers that fall due at the clock's current time: code
// that arms a timer for a deadline the clock already reached (a re-arm racing
// the Advance) gets a zero delay, which a fake clock runs only on its next
// Advance.
func AdvanceUntil(t testing.TB, clk *clock.Fake, d time.Duration, what string, cond func() bool) {
	t.Helper()
	clk.Advance(d)
	Eventually(t, what, func() bool {
		clk.Advance(0)
		return cond()
	})
}

// Recv returns the next value on ch, failing the test if none comes within
// Timeout.
func Recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(Timeout):
		t.Fatalf("nothing received within %v", Timeout)
		var zero T
		return zero
	}
}

// Result is the answer of one call of Do made by GoDo.
type Result struct {
	V   string
	Err error
	Out idem.Outcome
}

// GoDo calls idem.Do in a goroutine and returns a channel that receives its
// answer, outcome included.
func GoDo(ctx context.Context, rt *idem.Runtime, key string, fn func(context.Context) (string, error), opts ...idem.CallOption) <-chan Result {
	ch := make(chan Result, 1)
	go func() {
		var r Result
		r.V, r.Err = idem.Do(ctx, rt, key, fn, append(opts, idem.WithOutcome(&r.Out))...)
		ch <- r
	}()
	return ch
}

// Value returns a function that returns v.
func Value(v string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) { return v, nil }
}

// MustNotRun returns a function that fails the test if it runs: for the
// calls that must be answered without running theirs.
func MustNotRun(t testing.TB) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		t.Error("function ran, but it must not")
		return "", nil
	}
}

// Gate hands out functions under the test's control: each run announces
// itself on Started, then blocks until the test closes Open.
type Gate struct {
	Started chan struct{} // a value per run, as it starts (buffered: 100)
	Open    chan struct{} // closed by the test to let every run return
	runs    atomic.Int32
}

// NewGate returns a closed gate.
func NewGate() *Gate {
	return &Gate{Started: make(chan struct{}, 100), Open: make(chan struct{})}
}

// Fn returns a function that runs through the gate, then returns v and err.
func (g *Gate) Fn(v string, err error) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		g.runs.Add(1)
		g.Started <- struct{}{}
		<-g.Open
		return v, err
	}
}

// Runs returns how many of the gate's functions have started.
func (g *Gate) Runs() int { return int(g.runs.Load()) }

// Checkpoint is a point in a test's handler where the test can stop its
// runs: while it is held, each run that calls Pass announces itself on
// Started and waits until released. Unlike a Gate, which every run waits
// at, a Checkpoint lets runs through unless the test holds it. Embed a
// *Checkpoint (from NewCheckpoint) in a test handler.
type Checkpoint struct {
	Started chan struct{} // a value per run stopped here (buffered: 1000)
	mu      sync.Mutex
	gate    chan struct{} // nil: runs pass
}

// NewCheckpoint returns a checkpoint that lets runs through.
func NewCheckpoint() *Checkpoint { return &Checkpoint{Started: make(chan struct{}, 1000)} }

// Hold makes the runs that call Pass from now on wait until release is
// called; release may be called more than once.
func (c *Checkpoint) Hold() (release func()) {
	g := make(chan struct{})
	c.mu.Lock()
	c.gate = g
	c.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(g) }) }
}

// Unhold lets the runs that call Pass from now on through; those already
// stopped wait for their release.
func (c *Checkpoint) Unhold() {
	c.mu.Lock()
	c.gate = nil
	c.mu.Unlock()
}

// Pass is called by the handler: it returns at once unless the checkpoint
// is held, and then when it is released.
func (c *Checkpoint) Pass() {
	c.mu.Lock()
	g := c.gate
	c.mu.Unlock()
	if g != nil {
		c.Started <- struct{}{}
		<-g
	}
}

// WaitStarted waits until a run has stopped at the checkpoint, failing the
// test after Timeout.
func (c *Checkpoint) WaitStarted(t testing.TB) {
	t.Helper()
	Recv(t, c.Started)
}
