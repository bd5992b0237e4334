package main

import (
	"testing"
	"time"
)

// In the xstorm scenario a duplicate's settle latency counts apart by
// whether the execution it waited for ran on its own instance or on
// another; elsewhere only the overall figure is kept.
func TestRecordSettleByInstance(t *testing.T) {
	w := &worker{settleAny: true, inst: 1}
	w.recordSettle(time.Millisecond, 2)   // owner on instance 1: the same
	w.recordSettle(3*time.Millisecond, 1) // owner on instance 0: another
	w.recordSettle(5*time.Millisecond, 3)
	if w.settle.n != 3 || w.settleSame.n != 1 || w.settleOther.n != 2 {
		t.Fatalf("all %d, same %d, other %d", w.settle.n, w.settleSame.n, w.settleOther.n)
	}
	plain := &worker{}
	plain.recordSettle(time.Millisecond, 1)
	if plain.settle.n != 1 || plain.settleSame.n+plain.settleOther.n != 0 {
		t.Fatalf("outside xstorm: %+v", plain)
	}
}

// A negative settle sample (a later execution of the key overwrote doneAt)
// is recorded as 0 and counted, not added to the mean as a negative.
func TestRecordSettleNegative(t *testing.T) {
	w := &worker{}
	w.recordSettle(-5*time.Millisecond, 1)
	w.recordSettle(2*time.Millisecond, 1)
	if w.negSettle != 1 || w.settle.n != 2 || w.settle.sum != float64(2*time.Millisecond) {
		t.Fatalf("negative %d, n %d, sum %v", w.negSettle, w.settle.n, w.settle.sum)
	}
}

// doneAt holds monotonic ns since epoch, never 0.
func TestSinceEpoch(t *testing.T) {
	a := sinceEpoch()
	time.Sleep(time.Millisecond)
	if b := sinceEpoch(); a <= 0 || b-a < int64(time.Millisecond) {
		t.Fatalf("%d then %d", a, b)
	}
}
