package clock_test

import (
	"testing"
	"time"

	"github.com/idemrt/idem/clock"
)

func TestRealNow(t *testing.T) {
	c := clock.Real()
	before := time.Now()
	got := c.Now()
	after := time.Now()
	if got.Before(before) || got.After(after) {
		t.Fatalf("Real().Now() = %v, not within [%v, %v]", got, before, after)
	}
	if got.Location() != time.Local {
		t.Fatalf("Real().Now() is in %v, want Local like time.Now", got.Location())
	}
}

func TestRealAfterFuncRuns(t *testing.T) {
	c := clock.Real()
	fired := make(chan time.Time, 1)
	start := time.Now()
	const d = 5 * time.Millisecond
	tm := c.AfterFunc(d, func() { fired <- time.Now() })
	select {
	case at := <-fired:
		// A lower bound only: how late a timer fires is up to the scheduler.
		if at.Sub(start) < d {
			t.Fatalf("AfterFunc(%v) ran after only %v", d, at.Sub(start))
		}
	case <-time.After(waitLimit):
		t.Fatal("Real().AfterFunc never ran")
	}
	if tm.Stop() {
		t.Fatal("Stop after the call ran = true")
	}
}

func TestRealAfterFuncRunsOnAnotherGoroutine(t *testing.T) {
	c := clock.Real()
	ran := make(chan struct{})
	// The callback blocks until the test reads from ran; if AfterFunc ran it
	// on the caller's goroutine, the test would never get there.
	returnsWithin(t, "AfterFunc to return", func() {
		c.AfterFunc(0, func() { ran <- struct{}{} })
	})
	select {
	case <-ran:
	case <-time.After(waitLimit):
		t.Fatal("AfterFunc(0) never ran")
	}
}

func TestRealStop(t *testing.T) {
	c := clock.Real()
	ran := make(chan struct{}, 1)
	tm := c.AfterFunc(time.Hour, func() { ran <- struct{}{} })
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer = false")
	}
	if tm.Stop() {
		t.Fatal("second Stop = true")
	}
	select {
	case <-ran:
		t.Fatal("a stopped timer ran")
	default:
	}
}
