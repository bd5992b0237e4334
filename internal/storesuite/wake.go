package storesuite

import (
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

// Wake checks a caller on instance B (a runtime on sb) waiting for the
// owner on instance A (a runtime on sa; the two stores see the same keys):
// it settles, with A's answer, once A completes. B runs on a fake clock
// that never moves and the lease and settle time are an hour, so no
// re-claim timer can release it: only the store's wake-up does.
//
// With cut, cut runs while B is parked, before A completes (it cuts B's
// wake-up channel, losing what is sent while it is away): B must check its
// waits as soon as it listens again. A's completion may meet a cut of its
// own, so only B's answer is checked then.
func Wake(t *testing.T, sa, sb store.Store, cut func()) {
	a := idemtest.Runtime(t, idem.Options{Store: sa, Shards: 1})
	b := idemtest.Runtime(t, idem.Options{Store: sb, Shards: 1, Clock: clock.NewFake(time.Now())})
	g := idemtest.NewGate()
	owner := idemtest.GoDo(bg, a, "k", g.Fn("from A", nil), idem.WithLease(time.Hour))
	<-g.Started
	waiter := idemtest.GoDo(bg, b, "k", idemtest.MustNotRun(t), idem.WithSettle(time.Hour))
	idemtest.Eventually(t, "B parked", func() bool { return b.Stats().Waiters == 1 })
	if cut != nil {
		cut()
		close(g.Open)
		idemtest.Recv(t, owner)
		if r := idemtest.Recv(t, waiter); r.Err != nil || r.V != "from A" {
			t.Fatalf("B: %+v", r)
		}
		return
	}
	close(g.Open)
	if r := idemtest.Recv(t, owner); r.Err != nil {
		t.Fatal(r.Err)
	}
	start := time.Now()
	r := idemtest.Recv(t, waiter)
	if r.Err != nil || r.V != "from A" || r.Out != idem.Joined {
		t.Fatalf("B: %+v", r)
	}
	t.Logf("B settled %v after A's answer", time.Since(start))
}

// deaf hides the store's wake-ups.
type deaf struct{ store.Store }

// LostWake checks a caller on instance B whose store's wake-ups are
// hidden, waiting for the owner on instance A: its re-claim timer releases
// it, with A's answer.
func LostWake(t *testing.T, sa, sb store.Store) {
	a := idemtest.Runtime(t, idem.Options{Store: sa})
	b := idemtest.Runtime(t, idem.Options{Store: deaf{sb}})
	g := idemtest.NewGate()
	owner := idemtest.GoDo(bg, a, "k", g.Fn("from A", nil))
	<-g.Started
	waiter := idemtest.GoDo(bg, b, "k", idemtest.MustNotRun(t))
	idemtest.Eventually(t, "B parked", func() bool { return b.Stats().Waiters == 1 })
	close(g.Open)
	idemtest.Recv(t, owner)
	if r := idemtest.Recv(t, waiter); r.Err != nil || r.V != "from A" {
		t.Fatalf("B: %+v", r)
	}
}
