package idem_test

import (
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

// Wake-ups: a caller waiting for a key another instance runs is woken by
// the store when it settles, and by its own re-claim timer when the wake-up
// is lost.

// Two runtimes sharing a store: a caller on one waits for the owner on the
// other and is woken by the store's wake-up when it completes. The clock is
// fake and never moves, so no timer can have released it.
func TestCrossInstanceWake(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		clk := idemtest.FakeClock()
		mem := memStore(clk)
		rtA := idemtest.Runtime(t, idem.Options{Store: wrap(mem), Clock: clk})
		rtB := idemtest.Runtime(t, idem.Options{Store: wrap(mem), Clock: clk})
		waiter := waitAcross(t, rtA, rtB)
		r := idemtest.Recv(t, waiter)
		if r.Err != nil || r.V != "from A" || r.Out != idem.Joined {
			t.Fatalf("waiter on B: %+v", r)
		}
	})
}

// When the wake-up is lost, the waiter's re-claim timer still releases it.
func TestCrossInstanceLostWake(t *testing.T) {
	clk := idemtest.FakeClock()
	mem := memStore(clk)
	rtA := idemtest.Runtime(t, idem.Options{Store: mem, Clock: clk})
	rtB := idemtest.Runtime(t, idem.Options{Store: deaf{mem}, Clock: clk})
	waiter := waitAcross(t, rtA, rtB)
	stepUntilAnswered(t, clk, 100*time.Millisecond, waiter)
	if r := idemtest.Recv(t, waiter); r.Err != nil || r.V != "from A" || r.Out != idem.Joined {
		t.Fatalf("waiter on B: %+v", r)
	}
}

// waitAcross runs a call of "k" on rtA and parks a call of it on rtB while
// A's function runs, then lets A's call finish (with "from A"); it returns
// B's call.
func waitAcross(t *testing.T, rtA, rtB *idem.Runtime) <-chan idemtest.Result {
	t.Helper()
	g := idemtest.NewGate()
	owner := idemtest.GoDo(bg, rtA, "k", g.Fn("from A", nil))
	<-g.Started
	waiter := idemtest.GoDo(bg, rtB, "k", idemtest.MustNotRun(t))
	waitersAre(t, rtB, 1)
	close(g.Open)
	if r := idemtest.Recv(t, owner); r.Err != nil {
		t.Fatal(r.Err)
	}
	return waiter
}

// deaf is a store that never wakes anyone.
type deaf struct{ store.Store }

// A store wake-up that arrives while the shard's claim is out is kept: the
// shard claims again as soon as that claim reports the key in progress,
// instead of sleeping on its fallback timer. The clock is fake and never
// moves.
func TestWakeDuringClaim(t *testing.T) {
	clk := idemtest.FakeClock()
	mem := memStore(clk)
	rtA := idemtest.Runtime(t, idem.Options{Store: mem, Clock: clk})
	h := newHooked(mem)
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
	// A's Complete woke B through the store before A's call returned, so the
	// wake-up is queued on B's shard ahead of the claim's answer let go here:
	// the shard sees it while the claim is out.
	close(h.claimGo)
	select {
	case r := <-waiter:
		if r.Err != nil || r.V != "from A" {
			t.Fatalf("waiter: %+v", r)
		}
	case <-time.After(idemtest.Timeout): // the clock does not move: only the wake-up can answer it
		clk.Advance(5 * time.Second) // let it go, for a clean exit
		idemtest.Recv(t, waiter)
		t.Fatal("waiter on B not woken although A settled: its wake-up was dropped")
	}
}
