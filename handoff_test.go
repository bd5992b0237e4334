package idem_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// The tests in this file pin the rule "a hand-off is a new owner": a caller
// handed a key after a transient failure gets a lease of its own length from
// when it is granted, its own renewal mode and its own fingerprint, and no
// answer meant for an earlier owner changes it. Each is named for a
// behaviour that was once wrong.

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

func started(t testing.TB, s *stepFn, who string) {
	t.Helper()
	select {
	case <-s.started:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not start within 10s", who)
	}
}

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
		_, err := idem.Do(bg, rt2, "k", idemtest.MustNotRun(t), lease, idem.WithSettle(0))
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

// heldExtend is a store (batched: no store.InProcess) that holds the answer
// of the next Renew, after the store applied it, until released.
type heldExtend struct {
	store.Store
	mu      sync.Mutex
	hold    bool
	applied chan struct{}
	release chan struct{}
}

func (h *heldExtend) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
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

func (h *heldExtend) Subscribe(ctx context.Context, fn func(string)) (string, func(), error) {
	return h.Store.(store.Waker).Subscribe(ctx, fn)
}

// A renewal sent for a renewing owner whose answer comes back after that
// owner failed and the key went to a waiter without renewal leaves the
// waiter's lease hard: it is let go when its own lease ends.
func TestLateRenewalDoesNotRenewHardLease(t *testing.T) {
	clk := idemtest.FakeClock()
	h := &heldExtend{Store: memStore(clk), hold: true, applied: make(chan struct{}, 1), release: make(chan struct{})}
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

// An owner whose unrenewed lease ran out, but whom nobody took over, stores
// its result: the in-memory store keeps a claim in progress past lease + TTL
// until it is completed, released or taken over.
func TestSlowOwnerNobodyReplacedCompletes(t *testing.T) {
	clk := idemtest.FakeClock()
	rt := idemtest.Runtime(t, idem.Options{Store: memStore(clk), Clock: clk})
	a := newStepFn(t)
	opts := []idem.CallOption{idem.WithLease(time.Second), idem.WithTTL(time.Second), idem.WithoutRenewal()}
	owner := idemtest.GoDo(bg, rt, "k", a.fn, opts...)
	started(t, a, "A")
	clk.Advance(3 * time.Second) // past claim + lease + TTL
	a.ret <- stepRet{v: "A"}
	if r := idemtest.Recv(t, owner); r.Err != nil || r.V != "A" {
		t.Fatalf("slow owner: %+v, want its result stored (nobody took the key over)", r)
	}
	if v, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t), opts...); err != nil || v != "A" {
		t.Fatalf("replay: %q %v", v, err)
	}
}

// A second Close whose context ends while a first Close waits for a
// function that ignores its context returns at its own deadline.
func TestSecondCloseHonoursItsDeadline(t *testing.T) {
	rt, err := idem.New(idem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := newStepFn(t)
	owner := idemtest.GoDo(bg, rt, "k", a.fn)
	started(t, a, "A")
	first := make(chan error, 1)
	go func() { first <- rt.Close(bg) }()
	idemtest.Eventually(t, "the first Close to begin", func() bool {
		_, err := idem.Do(bg, rt, "other", idemtest.Value("x"))
		return errors.Is(err, idem.ErrClosed)
	})

	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	second := make(chan error, 1)
	go func() { second <- rt.Close(ctx) }()
	select {
	case err := <-second:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("second Close: %v, want context.DeadlineExceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second Close ignored its deadline")
	}
	select {
	case err := <-first:
		if err == nil {
			t.Error("first Close: nil, but it stopped before the function it waited for returned")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first Close did not return after the second gave up")
	}
	a.ret <- stepRet{v: "late"}
	if r := idemtest.Recv(t, owner); r.Err == nil {
		t.Fatalf("owner after a forced Close: %+v, want an error", r)
	}
}

// MaxRecords near math.MaxInt means "very large": results are kept, none is
// evicted (an overflow once made every claim evict a result).
func TestHugeMaxRecordsKeepsResults(t *testing.T) {
	for _, n := range []int{math.MaxInt, math.MaxInt - 1, math.MaxInt - 63} {
		mem := memstore.New(memstore.Options{MaxRecords: n})
		rt := idemtest.Runtime(t, idem.Options{Store: mem})
		for i := range 200 {
			if _, err := idem.Do(bg, rt, fmt.Sprint("k", i), idemtest.Value("v")); err != nil {
				t.Fatal(err)
			}
		}
		if mem.Evicted() != 0 || mem.Len() != 200 {
			t.Fatalf("MaxRecords %d: %d evicted, %d kept; want 0 and 200", n, mem.Evicted(), mem.Len())
		}
	}
}

// CacheEntries near math.MaxInt means "very large": the hot cache serves
// replays without a store operation (an overflow once turned it off).
func TestHugeCacheEntriesKeepsCache(t *testing.T) {
	for _, n := range []int{math.MaxInt, math.MaxInt - 1} {
		rt := idemtest.Runtime(t, idem.Options{CacheEntries: n, Shards: 3})
		if _, err := idem.Do(bg, rt, "k", idemtest.Value("v")); err != nil {
			t.Fatal(err)
		}
		ops := rt.Stats().Ops
		if v, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t)); err != nil || v != "v" {
			t.Fatalf("replay: %q %v", v, err)
		}
		if got := rt.Stats().Ops; got != ops {
			t.Fatalf("CacheEntries %d: the replay made %d store operations; want it served by the cache", n, got-ops)
		}
	}
}

// A lease is counted from when its claim was sent, not from when the answer
// came back: the store started it no earlier. An unrenewed owner whose claim
// answer was slow is let go when the store's lease ends, not a round trip
// later, so it never runs on a lease the store has already ended.
func TestLeaseCountsFromClaimSent(t *testing.T) {
	clk := idemtest.FakeClock()
	h := newHooked(memStore(clk), false)
	h.holdClaim = true
	rt := idemtest.Runtime(t, idem.Options{Store: h, Clock: clk})
	opts := []idem.CallOption{idem.WithLease(time.Second), idem.WithoutRenewal(), idem.WithSettle(time.Hour)}
	a, c := newStepFn(t), newStepFn(t)
	owner := idemtest.GoDo(bg, rt, "k", a.fn, opts...)
	<-h.claimDone // the store took the claim at 0 s
	clk.Advance(500 * time.Millisecond)
	h.claimGo <- struct{}{} // its answer arrives at 0.5 s
	started(t, a, "A")
	waiter := idemtest.GoDo(bg, rt, "k", c.fn, opts...)
	waitersAre(t, rt, 1)

	clk.Advance(500 * time.Millisecond) // 1 s: the store's lease of A ends
	started(t, c, "C (A's lease ended at 1 s)")
	c.ret <- stepRet{v: "C"}
	if r := idemtest.Recv(t, waiter); r.Err != nil || r.V != "C" {
		t.Fatalf("C: %+v", r)
	}
	a.ret <- stepRet{v: "A"}
	if r := idemtest.Recv(t, owner); !errors.Is(r.Err, idem.ErrLeaseLost) {
		t.Fatalf("A: %+v, want ErrLeaseLost", r)
	}
}

// A record that ends while a claim's answer is on its way is not handed to
// callers that arrived after it ended: the shard asks the store again, and
// the key runs anew.
func TestRecordEndedInFlightIsNotReplayed(t *testing.T) {
	clk := idemtest.FakeClock()
	h := newHooked(memStore(clk), false)
	rt := idemtest.Runtime(t, idem.Options{Store: h, Clock: clk, DisableCache: true})
	ttl := idem.WithTTL(time.Second)
	if _, err := idem.Do(bg, rt, "k", idemtest.Value("A"), ttl); err != nil {
		t.Fatal(err)
	}
	clk.Advance(500 * time.Millisecond)
	h.mu.Lock()
	h.holdClaim = true
	h.mu.Unlock()
	first := idemtest.GoDo(bg, rt, "k", idemtest.Value("B"), ttl)
	<-h.claimDone // the store found A, live until 1 s; its answer is held
	late := idemtest.GoDo(bg, rt, "k", idemtest.Value("C"), ttl, idem.WithSettle(time.Hour))
	waitersAre(t, rt, 1)
	clk.Advance(time.Second) // 1.5 s: A has ended
	h.claimGo <- struct{}{}
	r1, r2 := idemtest.Recv(t, first), idemtest.Recv(t, late)
	if r2.V == "A" || r1.V == "A" {
		t.Fatalf("callers got %q and %q: a record that had ended was replayed", r1.V, r2.V)
	}
	if r1.Err != nil || r1.V != "B" || r1.Out != idem.Executed || r2.Err != nil || r2.V != "B" || r2.Out != idem.Joined {
		t.Fatalf("first %+v, late %+v; want B executed and joined", r1, r2)
	}
}
