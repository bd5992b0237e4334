package idem_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

// hooked wraps a store, hiding store.InProcess (so the runtime batches) and
// optionally passing wake-ups through; it can hold Claim (after the store
// ran it) and Forget (before) until released.
type hooked struct {
	store.Store
	wake bool

	mu         sync.Mutex
	holdClaim  bool // hold the next Claim after it ran
	claimDone  chan struct{}
	claimGo    chan struct{}
	holdForget bool
	forgetIn   chan struct{}
	forgetGo   chan struct{}
}

func newHooked(s store.Store, wake bool) *hooked {
	return &hooked{Store: s, wake: wake,
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

// A "forever" TTL is refused with a clear error (it once overflowed the
// in-memory store's time arithmetic and made claims born expired); the
// longest TTL allowed works.
func TestHugeTTL(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	for _, opt := range []idem.CallOption{idem.WithTTL(math.MaxInt64), idem.WithLease(math.MaxInt64)} {
		if _, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t), opt); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Fatalf("huge duration: %v, want ErrInvalidArgument", err)
		}
	}
	if _, err := idem.New(idem.Options{TTL: math.MaxInt64}); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Fatalf("New with a huge TTL: %v", err)
	}
	v, err := idem.Do(bg, rt, "k", idemtest.Value("v"), idem.WithTTL(store.MaxDuration), idem.WithLease(store.MaxDuration))
	if err != nil || v != "v" {
		t.Fatalf("Do with the longest TTL and lease: %q, %v", v, err)
	}
	if v, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t)); err != nil || v != "v" {
		t.Fatalf("replay: %q, %v", v, err)
	}
}

// With the longest TTL, a second runtime sharing the store does not run fn
// while the first runs it.
func TestLongestTTLNoDoubleRun(t *testing.T) {
	mem := memStore(nil)
	rtA := idemtest.Runtime(t, idem.Options{Store: mem})
	rtB := idemtest.Runtime(t, idem.Options{Store: mem})
	g := idemtest.NewGate()
	a := idemtest.GoDo(bg, rtA, "k", g.Fn("A", nil), idem.WithTTL(store.MaxDuration))
	<-g.Started
	var runs atomic.Int32
	_, err := idem.Do(bg, rtB, "k", func(context.Context) (string, error) {
		runs.Add(1)
		return "B", nil
	}, idem.WithTTL(store.MaxDuration), idem.WithSettle(0))
	if !errors.Is(err, idem.ErrConflict) {
		t.Errorf("B: %v, want ErrConflict", err)
	}
	close(g.Open)
	idemtest.Recv(t, a)
	if runs.Load() != 0 {
		t.Fatalf("fn ran on B while A ran it: %d extra runs", runs.Load())
	}
}

// Forget has a way out when the shard stops under it (Close with a deadline
// while its store op is out): it gets ErrClosed, not a hang.
func TestForgetDuringForcedClose(t *testing.T) {
	h := newHooked(memStore(nil), false)
	h.holdForget = true
	rt, err := idem.New(idem.Options{Store: h})
	if err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithCancel(bg)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- rt.Forget(fctx, "k") }()
	<-h.forgetIn
	cctx, ccancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer ccancel()
	if err := rt.Close(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a store that does not answer: %v, want context.DeadlineExceeded", err)
	}
	close(h.forgetGo) // the store answers only after the shards stopped
	select {
	case err := <-done:
		if !errors.Is(err, idem.ErrClosed) {
			t.Fatalf("Forget: %v, want ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Forget still waiting 2s after Close returned")
	}
}

// A store wake-up that arrives while the shard's claim is out is kept: the
// shard claims again as soon as that claim reports the key in progress,
// instead of sleeping on its fallback timer. The clock is fake and never
// moves.
func TestWakeDuringClaim(t *testing.T) {
	clk := idemtest.FakeClock()
	mem := memStore(clk)
	rtA := idemtest.Runtime(t, idem.Options{Store: mem, Clock: clk})
	h := newHooked(mem, true)
	rtB := idemtest.Runtime(t, idem.Options{Store: waking{h}, Clock: clk})
	g := idemtest.NewGate()
	owner := idemtest.GoDo(bg, rtA, "k", g.Fn("from A", nil))
	<-g.Started
	h.mu.Lock()
	h.holdClaim = true
	h.mu.Unlock()
	waiter := idemtest.GoDo(bg, rtB, "k", idemtest.MustNotRun(t))
	<-h.claimDone // B's claim saw in-progress and registered for a wake-up
	close(g.Open)
	if r := idemtest.Recv(t, owner); r.Err != nil {
		t.Fatal(r.Err)
	}
	time.Sleep(20 * time.Millisecond) // B's shard handles the wake-up (phClaiming)
	close(h.claimGo)
	select {
	case r := <-waiter:
		if r.Err != nil || r.V != "from A" {
			t.Fatalf("waiter: %+v", r)
		}
	case <-time.After(2 * time.Second):
		clk.Advance(5 * time.Second) // let it go, for a clean exit
		idemtest.Recv(t, waiter)
		t.Fatal("waiter on B not woken although A settled: its wake-up was dropped")
	}
}

// A candidate that leaves while its claim is out does not pass that claim
// (its fingerprint and lease) to a waiter: it is released and the waiter
// claims with its own, so other instances judge callers by the request that
// runs.
func TestAbandonedCandidateClaim(t *testing.T) {
	mem := memStore(nil)
	h := newHooked(mem, false)
	rtA := idemtest.Runtime(t, idem.Options{Store: h})
	rtB := idemtest.Runtime(t, idem.Options{Store: mem})
	fpA, fpB := []byte("request-A"), []byte("request-B")

	h.mu.Lock()
	h.holdClaim = true
	h.mu.Unlock()
	xctx, xcancel := context.WithCancel(bg)
	x := idemtest.GoDo(xctx, rtA, "k", idemtest.MustNotRun(t), idem.WithFingerprint(fpA))
	<-h.claimDone // X's claim (fingerprint A) is in the store
	g := idemtest.NewGate()
	y := idemtest.GoDo(bg, rtA, "k", g.Fn("Y", nil), idem.WithFingerprint(fpB))
	waitersAre(t, rtA, 1)
	xcancel()
	if r := idemtest.Recv(t, x); !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("X: %+v", r)
	}
	close(h.claimGo)
	<-g.Started // Y owns the key and runs (fingerprint B)

	// Z repeats Y's request on another instance.
	_, err := idem.Do(bg, rtB, "k", idemtest.MustNotRun(t), idem.WithFingerprint(fpB), idem.WithSettle(0))
	close(g.Open)
	if r := idemtest.Recv(t, y); r.Err != nil {
		t.Fatalf("Y: %+v", r)
	}
	if errors.Is(err, idem.ErrFingerprintMismatch) {
		t.Fatalf("Z (same request as the running owner Y) got %v", err)
	}
}

// slowForget is a batched store whose Forget takes a few milliseconds.
type slowForget struct{ store.Store }

func (s slowForget) Forget(ctx context.Context, key string) error {
	time.Sleep(5 * time.Millisecond)
	return s.Store.Forget(ctx, key)
}

// A Forget that races Close (without a deadline) always gets an answer.
func TestForgetRacingClose(t *testing.T) {
	hung := 0
	for i := 0; i < 200 && hung == 0; i++ {
		rt, err := idem.New(idem.Options{Store: slowForget{memStore(nil)}, Shards: 1})
		if err != nil {
			t.Fatal(err)
		}
		fctx, cancel := context.WithTimeout(bg, time.Second)
		done := make(chan error, 1)
		go func() { done <- rt.Forget(fctx, "k") }()
		time.Sleep(time.Duration(i%50) * time.Microsecond)
		if err := rt.Close(bg); err != nil {
			t.Fatal(err)
		}
		if err := <-done; errors.Is(err, context.DeadlineExceeded) {
			hung++
		}
		cancel()
	}
	if hung > 0 {
		t.Fatalf("a Forget racing Close(bg) got no answer (only its own ctx deadline ended it)")
	}
}

// WithoutRenewal makes the lease a hard limit: a function that hangs in a
// live process is taken over when its lease ends, and its late result is
// refused.
func TestWithoutRenewal(t *testing.T) {
	clk := idemtest.FakeClock()
	rt := idemtest.Runtime(t, idem.Options{Clock: clk, Store: memStore(clk)})
	g := idemtest.NewGate()
	hung := idemtest.GoDo(bg, rt, "k", g.Fn("late", nil), idem.WithLease(time.Second), idem.WithoutRenewal())
	<-g.Started
	for i := 0; i < 20; i++ {
		clk.Advance(200 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
	v, err := idem.Do(bg, rt, "k", idemtest.Value("taken over"), idem.WithSettle(time.Hour))
	if err != nil || v != "taken over" {
		t.Fatalf("after the lease: %q %v", v, err)
	}
	close(g.Open)
	if r := idemtest.Recv(t, hung); !errors.Is(r.Err, idem.ErrLeaseLost) {
		t.Fatalf("the hung owner's late result: %+v, want ErrLeaseLost", r)
	}
}

// WithOwnerWaits keeps the owner's call until its function has returned,
// even after the caller's context ended.
func TestWithOwnerWaits(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	ctx, cancel := context.WithCancel(bg)
	var finished atomic.Bool
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := idem.Do(ctx, rt, "k", func(fctx context.Context) (string, error) {
			close(started)
			time.Sleep(50 * time.Millisecond)
			finished.Store(true)
			return "v", fctx.Err()
		}, idem.WithOwnerWaits())
		done <- err
	}()
	<-started
	cancel()
	<-done
	if !finished.Load() {
		t.Fatal("the owner's call returned before its function")
	}
	if v, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t)); err != nil || v != "v" {
		t.Fatalf("stored result: %q %v", v, err)
	}
}
