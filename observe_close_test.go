package idem_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idemrt/idem"
)

// lateObserver counts the store batches it is told of after the test
// marked Close as returned.
type lateObserver struct {
	closed  atomic.Bool
	late    atomic.Int32
	batches atomic.Int32
}

func (o *lateObserver) OnCall(idem.CallEvent) {}
func (o *lateObserver) OnStoreBatch(idem.StoreBatchEvent) {
	o.batches.Add(1)
	if o.closed.Load() {
		o.late.Add(1)
	}
}

// After a Close whose ctx ended while a store batch was out, the batch ends
// on its own, but the Observer is not called for it: an observer torn down
// after Close (a closed channel, unregistered metrics) is never called.
func TestObserverNotCalledAfterForcedClose(t *testing.T) {
	before := goleak.IgnoreCurrent()
	h := newHooked(memStore(nil))
	h.holdForget = true
	obs := &lateObserver{}
	rt, err := idem.New(idem.Options{Store: h, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- rt.Forget(bg, "k") }()
	<-h.forgetIn
	cctx, ccancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer ccancel()
	if err := rt.Close(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v", err)
	}
	obs.closed.Store(true)
	close(h.forgetGo)
	<-done
	goleak.VerifyNone(t, before) // the late batch has ended, observer call and all
	if n := obs.late.Load(); n > 0 {
		t.Errorf("Observer.OnStoreBatch called %d time(s) after Close returned", n)
	}
}
