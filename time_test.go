package idem_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

// The runtime's deadlines, on a fake clock: how long a result is kept (the
// TTL), and how long an owner holds its key (the lease) when it renews it,
// when it cannot, and when it runs without renewal.

func TestTTL(t *testing.T) {
	for _, disable := range []bool{false, true} {
		clk := idemtest.FakeClock()
		rt := idemtest.Runtime(t, idem.Options{Clock: clk, DisableCache: disable})
		if _, err := idem.Do(bg, rt, "k", idemtest.Value("v1"), idem.WithTTL(time.Minute)); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute - time.Nanosecond)
		if v, _ := idem.Do(bg, rt, "k", idemtest.MustNotRun(t)); v != "v1" {
			t.Fatalf("just before the TTL: %q", v)
		}
		clk.Advance(time.Nanosecond)
		var out idem.Outcome
		v, err := idem.Do(bg, rt, "k", idemtest.Value("v2"), idem.WithOutcome(&out))
		if err != nil || v != "v2" || out != idem.Executed {
			t.Fatalf("at the TTL (cache disabled=%v): %q %v %v; want a new run", disable, v, err, out)
		}
	}
}

// A record that ends while a claim's answer is on its way is not handed to
// callers that arrived after it ended: the shard asks the store again, and
// the key runs anew.
func TestRecordEndedInFlightIsNotReplayed(t *testing.T) {
	clk := idemtest.FakeClock()
	h := newHooked(memStore(clk))
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

// A key whose owner died (claimed, never finished) is taken over when its
// lease ends, by a caller that waited for it.
func TestTakeoverAfterLease(t *testing.T) {
	clk := idemtest.FakeClock()
	st := memStore(clk)
	rt := idemtest.Runtime(t, idem.Options{Store: st, Clock: clk})
	dead, err := st.Claim(bg, "k", store.ClaimRequest{Owner: "crashed", Lease: 10 * time.Second, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ch := idemtest.GoDo(bg, rt, "k", idemtest.Value("taken over"), idem.WithSettle(time.Minute))
	waitersAre(t, rt, 1)
	stepUntilAnswered(t, clk, 100*time.Millisecond, ch) // through the re-claims, past the lease
	r := idemtest.Recv(t, ch)
	if r.Err != nil || r.V != "taken over" || r.Out != idem.Executed {
		t.Fatalf("waiter: %+v", r)
	}
	rec, err := st.Get(bg, "k")
	if err != nil || rec.Token.Fence <= dead.Token.Fence {
		t.Fatalf("record %+v, %v: want a higher fence than %d", rec.Token, err, dead.Token.Fence)
	}
	if _, err := st.Complete(bg, "k", dead.Token, store.Record{Value: []byte(`"stale"`)}, time.Hour); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the dead owner's late Complete: %v", err)
	}
}

// An owner that cannot renew its lease (the store refuses Renew) is taken
// over by another instance after the lease; its own result is then refused
// with ErrLeaseLost and the new owner's stays.
func TestStaleOwnerRefused(t *testing.T) {
	clk := idemtest.FakeClock()
	mem := memStore(clk)
	fs := &faultStore{Store: mem, renewErr: errors.New("connection refused")}
	rtA := idemtest.Runtime(t, idem.Options{Store: fs, Clock: clk, Policy: idem.Policy{Lease: 10 * time.Second}})
	rtB := idemtest.Runtime(t, idem.Options{Store: mem, Clock: clk})
	g := idemtest.NewGate()
	a := idemtest.GoDo(bg, rtA, "k", g.Fn("A", nil))
	<-g.Started
	clk.Advance(11 * time.Second)
	var out idem.Outcome
	v, err := idem.Do(bg, rtB, "k", idemtest.Value("B"), idem.WithOutcome(&out))
	if err != nil || v != "B" || out != idem.Executed {
		t.Fatalf("B after A's lease: %q %v %v", v, err, out)
	}
	close(g.Open)
	if r := idemtest.Recv(t, a); !errors.Is(r.Err, idem.ErrLeaseLost) {
		t.Fatalf("A: %+v, want ErrLeaseLost", r)
	}
	if v, err := idem.Do(bg, rtA, "k", idemtest.MustNotRun(t)); err != nil || v != "B" {
		t.Fatalf("stored result: %q %v, want B's", v, err)
	}
}

// The lease is renewed while the function runs, so a long run keeps its key.
func TestLeaseRenewed(t *testing.T) {
	clk := idemtest.FakeClock()
	mem := memStore(clk)
	rtA := idemtest.Runtime(t, idem.Options{Store: mem, Clock: clk, Policy: idem.Policy{Lease: 9 * time.Second}})
	g := idemtest.NewGate()
	a := idemtest.GoDo(bg, rtA, "k", g.Fn("A", nil))
	<-g.Started
	// The next renewal is the shard's only clock timer. Each step waits
	// until the renewal went out; a renewal armed only after the next
	// Advance (the shard re-arms once the store answered) is fired by
	// AdvanceUntil at the time it was due.
	idemtest.Eventually(t, "the first renewal armed", func() bool { return clk.Timers() == 1 })
	for i := range 10 { // 30s: more than three leases
		ops := rtA.Stats().Ops
		idemtest.AdvanceUntil(t, clk, 3*time.Second, fmt.Sprint("renewal ", i+1), func() bool { return rtA.Stats().Ops > ops && clk.Timers() == 1 })
	}
	res, err := mem.Claim(bg, "k", store.ClaimRequest{Owner: "intruder", Lease: time.Second, TTL: time.Hour})
	if err != nil || res.Status != store.InProgress {
		t.Fatalf("claim by another instance after 30s: %v %v, want in-progress", res.Status, err)
	}
	close(g.Open)
	if r := idemtest.Recv(t, a); r.Err != nil || r.V != "A" {
		t.Fatalf("A: %+v", r)
	}
}

// When a renewal finds the lease lost, fn's context is cancelled with
// ErrLeaseLost as its cause and the result is refused.
func TestLeaseLostCancelsFunction(t *testing.T) {
	clk := idemtest.FakeClock()
	fs := &faultStore{Store: memStore(clk), renewErr: store.ErrLeaseLost}
	rt := idemtest.Runtime(t, idem.Options{Store: fs, Clock: clk, Policy: idem.Policy{Lease: 9 * time.Second}})
	started := make(chan struct{})
	ch := idemtest.GoDo(bg, rt, "k", func(ctx context.Context) (string, error) {
		close(started)
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), idem.ErrLeaseLost) {
			t.Errorf("cause = %v", context.Cause(ctx))
		}
		return "too late", nil
	})
	<-started
	// The first renewal, a third of the lease in, is the shard's only timer.
	idemtest.Eventually(t, "the first renewal armed", func() bool { return clk.Timers() == 1 })
	clk.Advance(3 * time.Second)
	if r := idemtest.Recv(t, ch); !errors.Is(r.Err, idem.ErrLeaseLost) {
		t.Fatalf("owner: %+v, want ErrLeaseLost", r)
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
	// The end of the lease is the shard's only timer; the call below queues
	// behind it on the shard.
	idemtest.Eventually(t, "the end of the lease armed", func() bool { return clk.Timers() == 1 })
	clk.Advance(4 * time.Second)
	v, err := idem.Do(bg, rt, "k", idemtest.Value("taken over"), idem.WithSettle(time.Hour))
	if err != nil || v != "taken over" {
		t.Fatalf("after the lease: %q %v", v, err)
	}
	close(g.Open)
	if r := idemtest.Recv(t, hung); !errors.Is(r.Err, idem.ErrLeaseLost) {
		t.Fatalf("the hung owner's late result: %+v, want ErrLeaseLost", r)
	}
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

// A lease is counted from when its claim was sent, not from when the answer
// came back: the store started it no earlier. An unrenewed owner whose claim
// answer was slow is let go when the store's lease ends, not a round trip
// later, so it never runs on a lease the store has already ended.
func TestLeaseCountsFromClaimSent(t *testing.T) {
	clk := idemtest.FakeClock()
	h := newHooked(memStore(clk))
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
