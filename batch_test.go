package idem_test

import (
	"fmt"

	"github.com/idemrt/idem/store"
	"sync"
	"testing"
	"time"

	"github.com/idemrt/idem"
)

// Store operations of one shard go out as batches, one at a time: the
// operations that arrive while a batch is out form the next one.
func TestGroupCommit(t *testing.T) {
	fs := &faultStore{Store: memStore(nil), batchDelay: 2 * time.Millisecond}
	rt := newRuntime(t, idem.Options{Store: fs, Shards: 1})
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := idem.Do(bg, rt, fmt.Sprint("k", i), value("v")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	ops, biggest := 0, 0
	for _, b := range fs.batches {
		ops += b
		biggest = max(biggest, b)
	}
	if fs.maxInFlight != 1 {
		t.Fatalf("%d batches of one shard were in flight at once, want 1", fs.maxInFlight)
	}
	if ops != 2*n || biggest < 2 {
		t.Fatalf("%d ops in %d batches (largest %d): want %d ops, some batched together", ops, len(fs.batches), biggest, 2*n)
	}
	if st := rt.Stats(); st.Ops != int64(ops) || st.Batches != int64(len(fs.batches)) {
		t.Fatalf("stats %+v disagree with the store's %d ops in %d batches", st, ops, len(fs.batches))
	}
}

// Two runtimes sharing a store: a caller on one waits for the owner on the
// other and is woken by the store's wake-up when it completes. The clock is
// fake and never moves, so no timer can have released it.
func TestCrossInstanceWake(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		clk := fakeClock()
		mem := memStore(clk)
		rtA := newRuntime(t, idem.Options{Store: wrap(mem), Clock: clk})
		rtB := newRuntime(t, idem.Options{Store: wrap(mem), Clock: clk})
		g := newGate()
		owner := goDo(bg, rtA, "k", g.fn("from A", nil))
		<-g.started
		waiter := goDo(bg, rtB, "k", mustNotRun(t))
		waitersAre(t, rtB, 1)
		close(g.open)
		if r := recv(t, owner); r.err != nil {
			t.Fatal(r.err)
		}
		r := recv(t, waiter)
		if r.err != nil || r.v != "from A" || r.out != idem.Joined {
			t.Fatalf("waiter on B: %+v", r)
		}
	})
}

// When the wake-up is lost, the waiter's re-claim timer still releases it.
func TestCrossInstanceLostWake(t *testing.T) {
	clk := fakeClock()
	mem := memStore(clk)
	rtA := newRuntime(t, idem.Options{Store: mem, Clock: clk})
	rtB := newRuntime(t, idem.Options{Store: deaf{mem}, Clock: clk})
	g := newGate()
	owner := goDo(bg, rtA, "k", g.fn("from A", nil))
	<-g.started
	waiter := goDo(bg, rtB, "k", mustNotRun(t))
	waitersAre(t, rtB, 1)
	close(g.open)
	if r := recv(t, owner); r.err != nil {
		t.Fatal(r.err)
	}
	for i := 0; i < 100 && len(waiter) == 0; i++ {
		clk.Advance(100 * time.Millisecond)
		time.Sleep(2 * time.Millisecond)
	}
	if r := recv(t, waiter); r.err != nil || r.v != "from A" || r.out != idem.Joined {
		t.Fatalf("waiter on B: %+v", r)
	}
}

// deaf is a store that never wakes anyone.
type deaf struct{ store.Store }
