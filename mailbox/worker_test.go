package mailbox_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/idemrt/idem/mailbox"
)

func TestWorkerRunsInOrderOnOneGoroutine(t *testing.T) {
	w := mailbox.NewWorker()
	defer w.Stop()

	const n = 1000
	var (
		order   []int
		ids     = map[uint64]int{}
		running atomic.Int32
		overlap atomic.Bool
		done    = make(chan struct{})
	)
	for i := range n {
		w.Submit(func() {
			if running.Add(1) != 1 {
				overlap.Store(true)
			}
			// Written only from scheduled funcs: the race detector flags
			// these if two runs ever execute on different goroutines
			// without ordering between them.
			order = append(order, i)
			ids[goid()]++
			running.Add(-1)
			if i == n-1 {
				close(done)
			}
		})
	}
	await(t, done, "the last scheduled run")

	if overlap.Load() {
		t.Error("two runs executed at the same time")
	}
	if len(order) != n {
		t.Fatalf("ran %d funcs, want %d", len(order), n)
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("run %d was func %d; runs out of order", i, v)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("runs used %d goroutines (%v), want 1", len(ids), ids)
	}
	if _, ok := ids[goid()]; ok {
		t.Fatal("runs executed on the caller's goroutine")
	}
}

func TestWorkerSameGoroutineAcrossIdlePeriods(t *testing.T) {
	w := mailbox.NewWorker()
	defer w.Stop()

	id := func() uint64 {
		ch := make(chan uint64, 1)
		w.Submit(func() { ch <- goid() })
		return <-ch
	}
	first := id()
	for i := range 50 {
		// Each run starts from an idle worker: the previous run has
		// returned and nothing is queued.
		if got := id(); got != first {
			t.Fatalf("run %d on goroutine %d, first run on %d", i, got, first)
		}
	}
}

// A protoactor mailbox reschedules itself from inside a run when messages
// are still waiting; that must not deadlock on the one-slot queue.
func TestWorkerSubmitFromInsideRun(t *testing.T) {
	w := mailbox.NewWorker()
	defer w.Stop()

	const depth = 500
	done := make(chan struct{})
	var count int
	var step func()
	step = func() {
		count++
		if count == depth {
			close(done)
			return
		}
		w.Submit(step)
	}
	w.Submit(step)
	await(t, done, "a chain of runs each scheduling the next")
	if count != depth {
		t.Fatalf("count = %d, want %d", count, depth)
	}
}

func TestWorkerConcurrentSubmit(t *testing.T) {
	w := mailbox.NewWorker()
	defer w.Stop()

	const senders, each = 8, 200
	var ran atomic.Int64
	var wg sync.WaitGroup
	all := make(chan struct{})
	for range senders {
		wg.Go(func() {
			for range each {
				w.Submit(func() {
					if ran.Add(1) == senders*each {
						close(all)
					}
				})
			}
		})
	}
	wg.Wait()
	await(t, all, "every run from concurrent senders")
	if got := ran.Load(); got != senders*each {
		t.Fatalf("ran %d, want %d", got, senders*each)
	}
}

func TestWorkerStopEndsGoroutine(t *testing.T) {
	before := goleak.IgnoreCurrent()
	w := mailbox.NewWorker()
	ran := make(chan struct{})
	w.Submit(func() { close(ran) })
	await(t, ran, "a run before Stop")
	w.Stop()
	goleak.VerifyNone(t, before)
}

func TestWorkerStopIsIdempotent(t *testing.T) {
	before := goleak.IgnoreCurrent()
	w := mailbox.NewWorker()
	returnsWithin(t, "repeated and concurrent Stop", func() {
		w.Stop()
		w.Stop()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(w.Stop)
		}
		wg.Wait()
	})
	goleak.VerifyNone(t, before)
}

func TestWorkerStopWaitsForRunningRun(t *testing.T) {
	w := mailbox.NewWorker()
	started := make(chan struct{})
	release := make(chan struct{})
	var finished atomic.Bool
	w.Submit(func() {
		close(started)
		<-release
		finished.Store(true)
	})
	await(t, started, "the run to start")
	w.Submit(func() {}) // fills the one-slot queue

	stopped := make(chan bool, 1)
	go func() {
		w.Stop()
		stopped <- finished.Load()
	}()
	// With the queue full, this Submit returns only once Stop has begun.
	returnsWithin(t, "Submit to see Stop", func() { w.Submit(func() {}) })
	// Stop has begun but the run is still blocked, so Stop must not have
	// returned. Yield a while (no sleeping) to give a wrong Stop the chance
	// to show itself; a right one cannot fail this.
	for range 200 {
		select {
		case <-stopped:
			close(release)
			t.Fatal("Stop returned while a run was still executing")
		default:
			runtime.Gosched()
		}
	}
	close(release)
	select {
	case ok := <-stopped:
		if !ok {
			t.Fatal("Stop returned before the running run finished")
		}
	case <-timeAfterLimit():
		t.Fatal("Stop did not return after the run finished")
	}
}

func TestWorkerSubmitAfterStopDoesNotBlockOrRun(t *testing.T) {
	w := mailbox.NewWorker()
	w.Stop()
	var ran atomic.Int32
	returnsWithin(t, "Submit after Stop", func() {
		// More than the queue holds: a send-only Submit would block on
		// the second call.
		for range 100 {
			w.Submit(func() { ran.Add(1) })
		}
	})
	if n := ran.Load(); n != 0 {
		t.Fatalf("%d runs executed after Stop", n)
	}
}

// A Submit waiting for the queue (one run executing, one queued) must be
// released by Stop rather than wait for the run to end.
func TestWorkerStopReleasesBlockedSubmit(t *testing.T) {
	w := mailbox.NewWorker()
	started := make(chan struct{})
	release := make(chan struct{})
	w.Submit(func() {
		close(started)
		<-release
	})
	await(t, started, "the first run to start")
	w.Submit(func() {}) // fills the one-slot queue

	blocked := make(chan struct{})
	go func() {
		defer close(blocked)
		w.Submit(func() {})
	}()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		w.Stop()
	}()
	// The running func still holds the worker, so the only way for the
	// third Submit to return is through Stop.
	await(t, blocked, "Stop to release a blocked Submit")
	close(release)
	await(t, stopped, "Stop to return")
}
