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

// modes runs f with the two ways a runtime talks to its store: inline (an
// in-process store) and through batches on an I/O worker (any other store).
func modes(t *testing.T, f func(t *testing.T, wrap func(store.Store) store.Store)) {
	t.Run("inline", func(t *testing.T) { f(t, func(s store.Store) store.Store { return s }) })
	t.Run("batched", func(t *testing.T) { f(t, func(s store.Store) store.Store { return &faultStore{Store: s} }) })
}

// stepUntilAnswered moves clk forward by step, leaving the runtimes time to
// act on each move, until ch holds an answer; it fails the test after
// idemtest.Timeout. It serves where the timer to fire cannot be told from
// the others (a waiter's re-claim, armed beside its settle time).
func stepUntilAnswered(t testing.TB, clk *clock.Fake, step time.Duration, ch <-chan idemtest.Result) {
	t.Helper()
	idemtest.Eventually(t, "an answer as the clock moves", func() bool {
		if len(ch) > 0 {
			return true
		}
		clk.Advance(step)
		return false
	})
}

// waitersAre waits until rt has n parked callers.
func waitersAre(t testing.TB, rt *idem.Runtime, n int) {
	t.Helper()
	idemtest.Eventually(t, "parked callers", func() bool { return rt.Stats().Waiters == n })
}

// faultStore wraps a store (hiding store.InProcess, so the runtime batches
// its operations) and injects faults.
type faultStore struct {
	store.Store
	mu          sync.Mutex
	renewErr    error
	completeErr error
	claimGate   chan struct{}
	batches     []int
	inFlight    int
	maxInFlight int
	batchGate   chan struct{} // when set, each batch waits until it is closed
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
	err := f.renewErr
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
	gate := f.batchGate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
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

func memStore(c clock.Clock) *memstore.Store { return memstore.New(memstore.Options{Clock: c}) }

// hooked wraps a store, hiding store.InProcess (so the runtime batches);
// it can hold Claim (after the store ran it) and Forget (before) until
// released. It hides the store's wake-ups too: wrap it in waking to pass
// them through.
type hooked struct {
	store.Store

	mu         sync.Mutex
	holdClaim  bool // hold the next Claim after it ran
	claimDone  chan struct{}
	claimGo    chan struct{}
	holdForget bool
	forgetIn   chan struct{}
	forgetGo   chan struct{}
}

func newHooked(s store.Store) *hooked {
	return &hooked{Store: s,
		claimDone: make(chan struct{}, 1), claimGo: make(chan struct{}),
		forgetIn: make(chan struct{}, 1), forgetGo: make(chan struct{})}
}

func (h *hooked) Claim(ctx context.Context, key string, req store.ClaimRequest) (store.ClaimResult, error) {
	res, err := h.Store.Claim(ctx, key, req)
	h.mu.Lock()
	hold := h.holdClaim
	h.holdClaim = false
	h.mu.Unlock()
	if hold {
		h.claimDone <- struct{}{}
		<-h.claimGo
	}
	return res, err
}

func (h *hooked) Forget(ctx context.Context, key string) error {
	h.mu.Lock()
	hold := h.holdForget
	h.mu.Unlock()
	if hold {
		h.forgetIn <- struct{}{}
		<-h.forgetGo
	}
	return h.Store.Forget(ctx, key)
}

// waking is a hooked store that passes wake-ups through.
type waking struct{ *hooked }

func (w waking) Subscribe(ctx context.Context, fn func(string)) (string, func(), error) {
	return w.Store.(store.Waker).Subscribe(ctx, fn)
}

// stepFn is a function under the test's control: it says when it starts,
// then returns what the test sends it. It ignores its context, like a
// function slower than its lease, but records whether the runtime had
// cancelled it when it returned.
type stepFn struct {
	started  chan struct{}
	ret      chan stepRet
	mu       sync.Mutex
	runs     int
	canceled bool // the context was done when the function returned
}

type stepRet struct {
	v   string
	err error
}

// newStepFn returns a stepFn that the test's end lets return, so that a
// failing test does not leave it blocked (and Close waiting for it).
func newStepFn(t testing.TB) *stepFn {
	s := &stepFn{started: make(chan struct{}, 4), ret: make(chan stepRet, 1)}
	t.Cleanup(func() {
		select {
		case s.ret <- stepRet{err: errors.New("test over")}:
		default:
		}
	})
	return s
}

func (s *stepFn) fn(ctx context.Context) (string, error) {
	s.mu.Lock()
	s.runs++
	s.mu.Unlock()
	s.started <- struct{}{}
	r := <-s.ret
	s.mu.Lock()
	s.canceled = ctx.Err() != nil
	s.mu.Unlock()
	return r.v, r.err
}

func (s *stepFn) wasCanceled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.canceled
}

// started waits until s has started, failing the test after
// idemtest.Timeout.
func started(t testing.TB, s *stepFn, who string) {
	t.Helper()
	select {
	case <-s.started:
	case <-time.After(idemtest.Timeout):
		t.Fatalf("%s did not start within %v", who, idemtest.Timeout)
	}
}

// pausable is a memstore that the runtime batches (it hides
// store.InProcess) and that can scan and inspect. It can pause one
// operation: the next Claim before it runs, the next Complete after it
// landed, or the next Forget before it runs, as armed by pauseNext. The
// paused operation says so on paused and waits until resumed.
type pausable struct {
	store.Store // the memstore, through store.Store's methods only
	mem         *memstore.Store

	mu      sync.Mutex
	armed   map[store.OpKind]bool
	paused  chan store.OpKind
	resume  chan struct{}
	forgets int         // Forgets that landed
	forgot  func(n int) // when set, called after the nth Forget landed
}

func newPausable() *pausable {
	mem := memstore.New(memstore.Options{})
	return &pausable{Store: mem, mem: mem, armed: make(map[store.OpKind]bool),
		paused: make(chan store.OpKind, 1), resume: make(chan struct{})}
}

// pauseNext pauses the next operation of kind.
func (p *pausable) pauseNext(kind store.OpKind) {
	p.mu.Lock()
	p.armed[kind] = true
	p.mu.Unlock()
}

// pauseIfArmed pauses the caller when an operation of kind is armed.
func (p *pausable) pauseIfArmed(kind store.OpKind) {
	p.mu.Lock()
	armed := p.armed[kind]
	delete(p.armed, kind)
	p.mu.Unlock()
	if armed {
		p.paused <- kind
		<-p.resume
	}
}

// waitPaused waits until an operation of kind is paused.
func (p *pausable) waitPaused(t testing.TB, kind store.OpKind) {
	t.Helper()
	if got := idemtest.Recv(t, p.paused); got != kind {
		t.Fatalf("%v paused, want %v", got, kind)
	}
}

func (p *pausable) Claim(ctx context.Context, key string, req store.ClaimRequest) (store.ClaimResult, error) {
	p.pauseIfArmed(store.OpClaim)
	return p.Store.Claim(ctx, key, req)
}

func (p *pausable) Complete(ctx context.Context, key string, tok store.Token, rec store.Record, ttl time.Duration) (store.Record, error) {
	r, err := p.Store.Complete(ctx, key, tok, rec, ttl)
	p.pauseIfArmed(store.OpComplete)
	return r, err
}

func (p *pausable) Forget(ctx context.Context, key string) error {
	p.pauseIfArmed(store.OpForget)
	err := p.Store.Forget(ctx, key)
	p.mu.Lock()
	p.forgets++
	n, forgot := p.forgets, p.forgot
	p.mu.Unlock()
	if forgot != nil {
		forgot(n)
	}
	return err
}

func (p *pausable) Inspect(ctx context.Context, key string) (store.Entry, error) {
	return p.mem.Inspect(ctx, key)
}

func (p *pausable) Scan(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	return p.mem.Scan(ctx, prefix, cursor, limit)
}
