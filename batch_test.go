package idem_test

import (
	"fmt"

	"sync"
	"testing"
	"time"

	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"

	"github.com/idemrt/idem"
)

// Store operations of one shard go out as batches, one at a time: the
// operations that arrive while a batch is out form the next one.
func TestGroupCommit(t *testing.T) {
	fs := &faultStore{Store: memStore(nil), batchDelay: 2 * time.Millisecond}
	rt := idemtest.Runtime(t, idem.Options{Store: fs, Shards: 1})
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := idem.Do(bg, rt, fmt.Sprint("k", i), idemtest.Value("v")); err != nil {
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
		clk := idemtest.FakeClock()
		mem := memStore(clk)
		rtA := idemtest.Runtime(t, idem.Options{Store: wrap(mem), Clock: clk})
		rtB := idemtest.Runtime(t, idem.Options{Store: wrap(mem), Clock: clk})
		g := idemtest.NewGate()
		owner := idemtest.GoDo(bg, rtA, "k", g.Fn("from A", nil))
		<-g.Started
		waiter := idemtest.GoDo(bg, rtB, "k", idemtest.MustNotRun(t))
		waitersAre(t, rtB, 1)
		close(g.Open)
		if r := idemtest.Recv(t, owner); r.Err != nil {
			t.Fatal(r.Err)
		}
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
	g := idemtest.NewGate()
	owner := idemtest.GoDo(bg, rtA, "k", g.Fn("from A", nil))
	<-g.Started
	waiter := idemtest.GoDo(bg, rtB, "k", idemtest.MustNotRun(t))
	waitersAre(t, rtB, 1)
	close(g.Open)
	if r := idemtest.Recv(t, owner); r.Err != nil {
		t.Fatal(r.Err)
	}
	for i := 0; i < 100 && len(waiter) == 0; i++ {
		clk.Advance(100 * time.Millisecond)
		time.Sleep(2 * time.Millisecond)
	}
	if r := idemtest.Recv(t, waiter); r.Err != nil || r.V != "from A" || r.Out != idem.Joined {
		t.Fatalf("waiter on B: %+v", r)
	}
}

// deaf is a store that never wakes anyone.
type deaf struct{ store.Store }
