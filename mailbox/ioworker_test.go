package mailbox_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/idemrt/idem/mailbox"
)

func TestIOWorkerRunsJobsInOrderOnOneGoroutine(t *testing.T) {
	w := mailbox.NewIOWorker()
	defer w.Stop()

	const n = 1000
	var (
		order []int
		ids   = map[uint64]bool{}
		done  = make(chan struct{})
	)
	for i := range n {
		ok := w.Submit(func() {
			order = append(order, i)
			ids[goid()] = true
			if i == n-1 {
				close(done)
			}
		})
		if !ok {
			t.Fatalf("Submit(%d) = false before Stop", i)
		}
	}
	await(t, done, "the last job")

	if len(order) != n {
		t.Fatalf("ran %d jobs, want %d", len(order), n)
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("job %d ran as number %d; out of order", v, i)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("jobs ran on %d goroutines, want 1", len(ids))
	}
	if ids[goid()] {
		t.Fatal("a job ran on the submitter's goroutine")
	}
}

// The owner submits from its own goroutine and must never run the store
// call itself: a slow job leaves Submit free as soon as the job is taken.
func TestIOWorkerSubmitDoesNotWaitForRunningJob(t *testing.T) {
	w := mailbox.NewIOWorker()
	defer w.Stop()

	started := make(chan struct{})
	release := make(chan struct{})
	w.Submit(func() {
		close(started)
		<-release
	})
	await(t, started, "the slow job to start")
	second := make(chan struct{})
	returnsWithin(t, "Submit while a job runs", func() {
		if !w.Submit(func() { close(second) }) {
			t.Error("Submit = false while running")
		}
	})
	close(release)
	await(t, second, "the queued job to run after the slow one")
}

func TestIOWorkerSubmitAfterStop(t *testing.T) {
	w := mailbox.NewIOWorker()
	w.Stop()
	var ran atomic.Int32
	returnsWithin(t, "Submit after Stop", func() {
		for i := range 100 {
			if w.Submit(func() { ran.Add(1) }) {
				t.Errorf("Submit #%d after Stop = true, want false", i)
				return
			}
		}
	})
	if n := ran.Load(); n != 0 {
		t.Fatalf("%d jobs ran after Stop", n)
	}
}

func TestIOWorkerStopEndsGoroutine(t *testing.T) {
	before := goleak.IgnoreCurrent()
	w := mailbox.NewIOWorker()
	done := make(chan struct{})
	w.Submit(func() { close(done) })
	await(t, done, "a job before Stop")
	w.Stop()
	goleak.VerifyNone(t, before)
}

func TestIOWorkerStopIsIdempotent(t *testing.T) {
	before := goleak.IgnoreCurrent()
	w := mailbox.NewIOWorker()
	returnsWithin(t, "repeated and concurrent Stop", func() {
		w.Stop()
		w.Stop()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(w.Stop)
		}
		wg.Wait()
	})
	if w.Submit(func() {}) {
		t.Fatal("Submit after repeated Stop = true")
	}
	goleak.VerifyNone(t, before)
}

func TestIOWorkerStopWaitsForRunningJob(t *testing.T) {
	w := mailbox.NewIOWorker()
	started := make(chan struct{})
	release := make(chan struct{})
	var finished atomic.Bool
	w.Submit(func() {
		close(started)
		<-release
		finished.Store(true)
	})
	await(t, started, "the job to start")
	w.Submit(func() {}) // fills the one-slot queue

	stopped := make(chan bool, 1)
	go func() {
		w.Stop()
		stopped <- finished.Load()
	}()
	// With the queue full, this Submit returns only once Stop has begun.
	returnsWithin(t, "Submit to see Stop", func() { w.Submit(func() {}) })
	// Stop has begun but the job is still blocked, so Stop must not have
	// returned. Yield a while (no sleeping) to give a wrong Stop the chance
	// to show itself; a right one cannot fail this.
	for range 200 {
		select {
		case <-stopped:
			close(release)
			t.Fatal("Stop returned while a job was still executing")
		default:
			runtime.Gosched()
		}
	}
	close(release)
	select {
	case ok := <-stopped:
		if !ok {
			t.Fatal("Stop returned before the running job finished")
		}
	case <-timeAfterLimit():
		t.Fatal("Stop did not return after the job finished")
	}
}

// A Submit waiting for room (one job running, one queued) reports false
// once Stop is called, instead of blocking until the running job ends.
func TestIOWorkerStopReleasesBlockedSubmit(t *testing.T) {
	w := mailbox.NewIOWorker()
	started := make(chan struct{})
	release := make(chan struct{})
	w.Submit(func() {
		close(started)
		<-release
	})
	await(t, started, "the first job to start")
	if !w.Submit(func() {}) { // fills the one-slot queue
		t.Fatal("second Submit = false")
	}

	result := make(chan bool, 1)
	go func() { result <- w.Submit(func() {}) }()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		w.Stop()
	}()
	// The running job still holds the worker, so the third Submit can only
	// return through Stop.
	select {
	case ok := <-result:
		if ok {
			t.Fatal("a Submit released by Stop reported true")
		}
	case <-timeAfterLimit():
		t.Fatal("Stop did not release a blocked Submit")
	}
	close(release)
	await(t, stopped, "Stop to return")
}

// Submit racing with Stop must return, and a job is run at most once.
func TestIOWorkerSubmitRacingStop(t *testing.T) {
	for range 50 {
		w := mailbox.NewIOWorker()
		var ran atomic.Int32
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 20 {
					w.Submit(func() { ran.Add(1) })
				}
			})
		}
		wg.Go(w.Stop)
		returnsWithin(t, "Submits racing Stop", wg.Wait)
		w.Stop()
		if ran.Load() > 80 {
			t.Fatalf("%d jobs ran, more than were submitted", ran.Load())
		}
		if w.Submit(func() { ran.Add(1) }) {
			t.Fatal("Submit after Stop = true")
		}
	}
}
