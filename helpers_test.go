package idem_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

var bg = context.Background()

// epoch is where fake clocks start.
var epoch = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// newRuntime starts a runtime that the test closes at its end.
func newRuntime(t testing.TB, opts idem.Options) *idem.Runtime { return idemtest.Runtime(t, opts) }

// modes runs f with the two ways a runtime talks to its store: inline (an
// in-process store) and through batches on an I/O worker (any other store).
func modes(t *testing.T, f func(t *testing.T, wrap func(store.Store) store.Store)) {
	t.Run("inline", func(t *testing.T) { f(t, func(s store.Store) store.Store { return s }) })
	t.Run("batched", func(t *testing.T) { f(t, func(s store.Store) store.Store { return &faultStore{Store: s} }) })
}

// eventually waits until cond holds, failing the test after 10s.
func eventually(t testing.TB, what string, cond func() bool) { idemtest.Eventually(t, what, cond) }

// waitersAre waits until rt has n parked callers.
func waitersAre(t testing.TB, rt *idem.Runtime, n int) {
	t.Helper()
	eventually(t, "parked callers", func() bool { return rt.Stats().Waiters == n })
}

// gate is a function that blocks until opened, counting its runs.
type gate struct {
	mu      sync.Mutex
	runs    int
	started chan struct{}
	open    chan struct{}
}

func newGate() *gate { return &gate{started: make(chan struct{}, 100), open: make(chan struct{})} }

func (g *gate) fn(v string, err error) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		g.mu.Lock()
		g.runs++
		g.mu.Unlock()
		g.started <- struct{}{}
		<-g.open
		return v, err
	}
}

func (g *gate) Runs() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runs
}

// result is one call's answer, collected from a goroutine.
type result struct {
	v   string
	err error
	out idem.Outcome
}

// goDo runs Do in a goroutine and returns a channel with its answer.
func goDo(ctx context.Context, rt *idem.Runtime, key string, fn func(context.Context) (string, error), opts ...idem.CallOption) <-chan result {
	ch := make(chan result, 1)
	go func() {
		var r result
		r.v, r.err = idem.Do(ctx, rt, key, fn, append(opts, idem.WithOutcome(&r.out))...)
		ch <- r
	}()
	return ch
}

func recv(t testing.TB, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s")
		return result{}
	}
}

func value(v string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) { return v, nil }
}

func mustNotRun(t testing.TB) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		t.Error("function ran, but it must not")
		return "", nil
	}
}

// faultStore wraps a store (hiding store.InProcess, so the runtime batches
// its operations) and injects faults.
type faultStore struct {
	store.Store
	mu          sync.Mutex
	extendErr   error
	completeErr error
	claimGate   chan struct{}
	batches     []int
	inFlight    int
	maxInFlight int
	batchDelay  time.Duration
}

func (f *faultStore) Claim(ctx context.Context, key string, req store.ClaimRequest) (store.ClaimResult, error) {
	f.mu.Lock()
	g := f.claimGate
	f.mu.Unlock()
	if g != nil {
		<-g
	}
	return f.Store.Claim(ctx, key, req)
}

func (f *faultStore) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	f.mu.Lock()
	err := f.extendErr
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.Store.Renew(ctx, key, tok, lease)
}

func (f *faultStore) Complete(ctx context.Context, key string, tok store.Token, rec store.Record, ttl time.Duration) (store.Record, error) {
	f.mu.Lock()
	err := f.completeErr
	f.mu.Unlock()
	if err != nil {
		return store.Record{}, err
	}
	return f.Store.Complete(ctx, key, tok, rec, ttl)
}

// Batch records each batch's size and how many batches overlap.
func (f *faultStore) Batch(ctx context.Context, ops []*store.Op) {
	f.mu.Lock()
	f.batches = append(f.batches, len(ops))
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	delay := f.batchDelay
	f.mu.Unlock()
	time.Sleep(delay)
	for _, op := range ops {
		store.RunOne(ctx, f, op)
	}
	f.mu.Lock()
	f.inFlight--
	f.mu.Unlock()
}

// Subscribe passes wake-ups through when the wrapped store has them.
func (f *faultStore) Subscribe(ctx context.Context, fn func(string)) (string, func(), error) {
	if w, ok := f.Store.(store.Waker); ok {
		return w.Subscribe(ctx, fn)
	}
	return "", func() {}, errors.New("no waker")
}

func fakeClock() *clock.Fake { return clock.NewFake(epoch) }

func memStore(c clock.Clock) *memstore.Store { return memstore.New(memstore.Options{Clock: c}) }
