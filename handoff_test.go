package idem_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

// The tests in this file pin the rule "a hand-off is a new owner": a caller
// handed a key after a transient failure gets a lease of its own length from
// when it is granted, its own renewal mode and its own fingerprint, and no
// answer meant for an earlier owner changes it.

// A waiter handed the key at 0.9 s of a 1 s unrenewed lease keeps it for a
// lease of its own (to 1.9 s), instead of being let go at 1 s with
// ErrLeaseLost when another caller waits.
func TestHandOffGetsItsOwnLease(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		clk := idemtest.FakeClock()
		rt := idemtest.Runtime(t, idem.Options{Store: wrap(memStore(clk)), Clock: clk})
		opts := []idem.CallOption{idem.WithLease(time.Second), idem.WithoutRenewal(), idem.WithSettle(time.Hour)}
		a, b := newStepFn(t), newStepFn(t)
		ownerA := idemtest.GoDo(bg, rt, "k", a.fn, opts...)
		started(t, a, "A")
		waiterB := idemtest.GoDo(bg, rt, "k", b.fn, opts...)
		waitersAre(t, rt, 1)

		clk.Advance(900 * time.Millisecond)
		a.ret <- stepRet{err: errTransient}
		if r := idemtest.Recv(t, ownerA); !errors.Is(r.Err, errTransient) {
			t.Fatalf("A: %+v, want its transient error", r)
		}
		started(t, b, "B (handed the key)")
		waiterC := idemtest.GoDo(bg, rt, "k", idemtest.MustNotRun(t), opts...)
		waitersAre(t, rt, 1)

		clk.Advance(200 * time.Millisecond) // 1.1 s: A's lease is over, B's is not
		b.ret <- stepRet{v: "B"}
		if r := idemtest.Recv(t, waiterB); r.Err != nil || r.V != "B" || r.Out != idem.Executed {
			t.Fatalf("B: %+v, want its own result stored (it held a lease of its own to 1.9 s)", r)
		}
		if b.wasCanceled() {
			t.Error("B's context was cancelled at 1.1 s, within its own lease")
		}
		if r := idemtest.Recv(t, waiterC); r.Err != nil || r.V != "B" || r.Out != idem.Joined {
			t.Fatalf("C: %+v, want B's result", r)
		}
	})
}

// Two runtimes on one store do not run fn at the same time when the key is
// handed from a no-renewal owner to a renewing waiter: the waiter's claim
// has a lease of its own, so the other runtime cannot take the key over
// before the waiter's first renewal.
func TestHandOffToRenewingWaiterKeepsOtherRuntimesOut(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		clk := idemtest.FakeClock()
		mem := memStore(clk)
		rt1 := idemtest.Runtime(t, idem.Options{Store: wrap(mem), Clock: clk})
		rt2 := idemtest.Runtime(t, idem.Options{Store: wrap(mem), Clock: clk})
		lease := idem.WithLease(time.Second)
		a, b := newStepFn(t), newStepFn(t)
		ownerA := idemtest.GoDo(bg, rt1, "k", a.fn, lease, idem.WithoutRenewal())
		started(t, a, "A")
		waiterB := idemtest.GoDo(bg, rt1, "k", b.fn, lease, idem.WithSettle(time.Hour))
		waitersAre(t, rt1, 1)

		clk.Advance(900 * time.Millisecond)
		a.ret <- stepRet{err: errTransient}
		idemtest.Recv(t, ownerA)
		started(t, b, "B (handed the key)")

		clk.Advance(200 * time.Millisecond) // 1.1 s: past A's lease, before B's first renewal
		_, err := idem.Do(bg, rt2, "k", idemtest.MustNotRun(t), lease, idem.WithFailFast())
		if !errors.Is(err, idem.ErrConflict) {
			t.Fatalf("runtime 2 while B runs: %v, want ErrConflict (B holds the key)", err)
		}
		b.ret <- stepRet{v: "B"}
		if r := idemtest.Recv(t, waiterB); r.Err != nil || r.V != "B" {
			t.Fatalf("B: %+v, want its result stored", r)
		}
	})
}

// A waiter handed a key whose first owner renewed a 60 s lease, running
// itself without renewal under a 1 s lease, is let go after its own 1 s,
// and the next caller then gets the key at once: the store claim does not
// keep the key locked for the first owner's 60 s.
func TestLetGoDoesNotLockKeyForEarlierOwnersLease(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		clk := idemtest.FakeClock()
		rt := idemtest.Runtime(t, idem.Options{Store: wrap(memStore(clk)), Clock: clk})
		settle := idem.WithSettle(time.Hour)
		a, b, c := newStepFn(t), newStepFn(t), newStepFn(t)
		ownerA := idemtest.GoDo(bg, rt, "k", a.fn, idem.WithLease(time.Minute), settle)
		started(t, a, "A")
		hard := []idem.CallOption{idem.WithLease(time.Second), idem.WithoutRenewal(), settle}
		waiterB := idemtest.GoDo(bg, rt, "k", b.fn, hard...)
		waitersAre(t, rt, 1)

		clk.Advance(500 * time.Millisecond)
		a.ret <- stepRet{err: errTransient}
		idemtest.Recv(t, ownerA)
		started(t, b, "B (handed the key)")
		waiterC := idemtest.GoDo(bg, rt, "k", c.fn, hard...)
		waitersAre(t, rt, 1)

		clk.Advance(time.Second) // 1.5 s: B's own lease ends; C takes over
		started(t, c, "C (after B was let go)")
		c.ret <- stepRet{v: "C"}
		if r := idemtest.Recv(t, waiterC); r.Err != nil || r.V != "C" || r.Out != idem.Executed {
			t.Fatalf("C: %+v, want its own run", r)
		}
		b.ret <- stepRet{v: "B"}
		if r := idemtest.Recv(t, waiterB); !errors.Is(r.Err, idem.ErrLeaseLost) {
			t.Fatalf("B, let go at the end of its lease: %+v, want ErrLeaseLost", r)
		}
		if !b.wasCanceled() {
			t.Error("B's context was not cancelled when it was let go")
		}
	})
}

// heldRenew is a store (batched: no store.InProcess) that holds the answer
// of the next Renew, after the store applied it, until released.
type heldRenew struct {
	store.Store
	mu      sync.Mutex
	hold    bool
	applied chan struct{}
	release chan struct{}
}

func (h *heldRenew) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	err := h.Store.Renew(ctx, key, tok, lease)
	h.mu.Lock()
	hold := h.hold
	h.hold = false
	h.mu.Unlock()
	if hold {
		h.applied <- struct{}{}
		<-h.release
	}
	return err
}

func (h *heldRenew) Subscribe(ctx context.Context, fn func(string)) (string, func(), error) {
	return h.Store.(store.Waker).Subscribe(ctx, fn)
}

// A renewal sent for a renewing owner whose answer comes back after that
// owner failed and the key went to a waiter without renewal leaves the
// waiter's lease hard: it is let go when its own lease ends.
func TestLateRenewalDoesNotRenewHardLease(t *testing.T) {
	clk := idemtest.FakeClock()
	h := &heldRenew{Store: memStore(clk), hold: true, applied: make(chan struct{}, 1), release: make(chan struct{})}
	rt := idemtest.Runtime(t, idem.Options{Store: h, Clock: clk})
	settle := idem.WithSettle(time.Hour)
	lease := idem.WithLease(3 * time.Second)
	a, b, c := newStepFn(t), newStepFn(t), newStepFn(t)
	ownerA := idemtest.GoDo(bg, rt, "k", a.fn, lease, settle)
	started(t, a, "A")
	waiterB := idemtest.GoDo(bg, rt, "k", b.fn, lease, idem.WithoutRenewal(), settle)
	waitersAre(t, rt, 1)

	clk.Advance(time.Second) // A's renewal goes out; its answer is held
	<-h.applied
	ops := rt.Stats().Ops
	a.ret <- stepRet{err: errTransient}
	// Let the shard take A's failure first: it either hands the key to B
	// at once or queues A's release (behind the held renewal).
	idemtest.Eventually(t, "the shard to take A's failure", func() bool {
		return len(b.started) > 0 || rt.Stats().Ops > ops
	})
	close(h.release) // now the renewal's answer arrives, late
	idemtest.Recv(t, ownerA)
	started(t, b, "B (handed the key)")
	waiterC := idemtest.GoDo(bg, rt, "k", c.fn, lease, idem.WithoutRenewal(), settle)
	waitersAre(t, rt, 1)

	for range 4 { // to 5 s: past the end of B's hard lease (at most 4 s)
		clk.Advance(time.Second)
	}
	started(t, c, "C (after B's hard lease ended)")
	c.ret <- stepRet{v: "C"}
	if r := idemtest.Recv(t, waiterC); r.Err != nil || r.V != "C" {
		t.Fatalf("C: %+v", r)
	}
	b.ret <- stepRet{v: "B"}
	if r := idemtest.Recv(t, waiterB); !errors.Is(r.Err, idem.ErrLeaseLost) {
		t.Fatalf("B: %+v, want ErrLeaseLost (its hard lease ended)", r)
	}
}

// After a hand-off, the key in flight carries the new owner's fingerprint:
// a caller whose fingerprint differs from the first owner's but not from
// the new owner's (none) waits and gets the new owner's result, the same
// answer it gets from the stored record afterwards.
func TestHandOffTakesNewOwnersFingerprint(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		rt := idemtest.Runtime(t, idem.Options{Store: wrap(memStore(nil))})
		settle := idem.WithSettle(time.Hour)
		a, b := newStepFn(t), newStepFn(t)
		ownerA := idemtest.GoDo(bg, rt, "k", a.fn, idem.WithFingerprint([]byte("X")), settle)
		started(t, a, "A")
		waiterB := idemtest.GoDo(bg, rt, "k", b.fn, settle) // no fingerprint: it may wait for A
		waitersAre(t, rt, 1)
		a.ret <- stepRet{err: errTransient}
		idemtest.Recv(t, ownerA)
		started(t, b, "B (handed the key)")

		callerY := idemtest.GoDo(bg, rt, "k", idemtest.MustNotRun(t), idem.WithFingerprint([]byte("Y")), settle)
		waitersAre(t, rt, 1)
		b.ret <- stepRet{v: "B"}
		if r := idemtest.Recv(t, waiterB); r.Err != nil || r.V != "B" {
			t.Fatalf("B: %+v", r)
		}
		inFlight := idemtest.Recv(t, callerY)
		v, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t), idem.WithFingerprint([]byte("Y")))
		if inFlight.Err != nil || inFlight.V != "B" || err != nil || v != "B" {
			t.Fatalf("fingerprint Y: %+v while B ran, then %q %v from the record; want B's result both times", inFlight, v, err)
		}
	})
}

// A candidate that leaves while its claim is out does not pass that claim
// (its fingerprint and lease) to a waiter: it is released and the waiter
// claims with its own, so other instances judge callers by the request that
// runs.
func TestAbandonedCandidateClaim(t *testing.T) {
	mem := memStore(nil)
	h := newHooked(mem)
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
	_, err := idem.Do(bg, rtB, "k", idemtest.MustNotRun(t), idem.WithFingerprint(fpB), idem.WithFailFast())
	close(g.Open)
	if r := idemtest.Recv(t, y); r.Err != nil {
		t.Fatalf("Y: %+v", r)
	}
	if errors.Is(err, idem.ErrFingerprintMismatch) {
		t.Fatalf("Z (same request as the running owner Y) got %v", err)
	}
}
