package mailbox_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemrt/idem/mailbox"
)

// The owner submits from its own goroutine and must never run the store
// call itself: a slow job leaves Submit free as soon as the job is taken.
func TestWorkerSubmitDoesNotWaitForRunningJob(t *testing.T) {
	w := mailbox.NewWorker()
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

func TestWorkerSubmitAfterStop(t *testing.T) {
	w := mailbox.NewWorker()
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

// Submit racing with Stop must return, and a job is run at most once.
func TestWorkerSubmitRacingStop(t *testing.T) {
	for range 50 {
		w := mailbox.NewWorker()
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

// Halt returns at once while a job runs (a shutdown past its deadline must
// not hang on a store that does not answer); the job finishes, nothing more
// is accepted, and the goroutine ends after it.
func TestWorkerHaltDoesNotWaitForRunningJob(t *testing.T) {
	w := mailbox.NewWorker()
	started, release, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
	w.Submit(func() {
		close(started)
		<-release
		close(finished)
	})
	await(t, started, "the job to start")
	returnsWithin(t, "Halt while a job runs", w.Halt)
	if w.Submit(func() {}) {
		t.Error("Submit after Halt = true")
	}
	close(release)
	await(t, finished, "the running job to finish after Halt")
	returnsWithin(t, "Stop after Halt", w.Stop)
}
