package main

import (
	"fmt"
	"math"
	"runtime"
	"runtime/metrics"
	"slices"
	"time"
)

// Heap measurements: the Go heap a unit of something costs (a key in
// flight, a stored record), as the difference between the live heap before
// and after adding n units that stay reachable.
//
// One reading of the live heap, even right after runtime.GC, can still
// count memory the program has dropped. On a loaded machine the 22 MB of
// the runtime that had just measured the stored records (closed, its
// goroutines gone) stayed live through two forced collections and was
// gone 250 ms later, between the two readings of the next measurement,
// which came out at -1.93 KiB per key in flight. What held it is the Go
// runtime's business (a stopped timer waits in its P's heap until the P
// cleans it up, say); the measurement must not depend on it. So:
//
//   - a reading is the least of several collections a few milliseconds
//     apart, until two agree: a late free only ever inflates a reading;
//   - the measurement runs in rounds, each the same experiment (its own
//     runtime, its own units, its own two readings), and the figure is
//     their median: a free spoils at most the one round it falls in;
//     nothing the rounds made is closed before the last one ends;
//   - a round whose delta is not positive (n reachable units cannot cost
//     nothing) proves that other memory was freed during it: it is dropped
//     and run again, up to twice the rounds in all;
//   - without enough positive rounds there is no figure: the measurement
//     says it is unsound and why, and the report prints that, never a
//     number.

// heapFigure is one heap measurement.
type heapFigure struct {
	PerUnit float64   // bytes per unit: the median of Rounds; 0 when Unsound
	Rounds  []float64 // bytes per unit of each round kept, in order
	Dropped int       // rounds dropped for a delta that was not positive
	Unsound string    // why there is no figure; "" when there is one
}

// heapMeter measures heap figures: rounds rounds (more when some are
// dropped), reading the live heap with read.
type heapMeter struct {
	rounds int
	read   func() uint64
}

// A heapRound is one round's work, made before the round's first reading
// (a runtime of its own, say, so that the rounds repeat one experiment):
// add adds the units, which stay reachable through the second reading;
// done, when set, lets them go after it.
type heapRound struct {
	add  func() error
	done func()
}

// measure returns the heap cost per unit of n units: each round is made
// by newRound, then the heap is read, its add adds n units and the heap
// is read again. An error of newRound or add ends the measurement. The
// caller keeps what the rounds made reachable until measure returns: a
// free during a later round would spoil it.
func (hm heapMeter) measure(n int, newRound func(round int) (heapRound, error)) (heapFigure, error) {
	var f heapFigure
	if n <= 0 || hm.rounds <= 0 {
		return f, fmt.Errorf("heap measurement of %d units in %d rounds", n, hm.rounds)
	}
	for round := 0; len(f.Rounds) < hm.rounds && round < 2*hm.rounds; round++ {
		r, err := newRound(round)
		if err != nil {
			return f, err
		}
		before := hm.read()
		err = r.add()
		after := hm.read()
		if r.done != nil {
			r.done()
		}
		if err != nil {
			return f, err
		}
		perUnit := (float64(after) - float64(before)) / float64(n)
		if !(perUnit > 0) || !finite(perUnit) {
			f.Dropped++
			continue
		}
		f.Rounds = append(f.Rounds, perUnit)
	}
	if len(f.Rounds) < hm.rounds {
		f.Unsound = fmt.Sprintf("the heap did not grow in %d of %d rounds: other memory was freed meanwhile", f.Dropped, f.Dropped+len(f.Rounds))
		return f, nil
	}
	f.PerUnit = median(f.Rounds)
	return f, nil
}

// median returns the median of vs (not empty), leaving vs as it is.
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// liveHeap returns the bytes of the Go heap that a forced collection
// found live: the least over collections 5 ms apart, until two in a row
// agree within 0.1% (at most 10).
func liveHeap() uint64 {
	least, prev := uint64(math.MaxUint64), uint64(0)
	for i := range 10 {
		if i > 0 {
			time.Sleep(5 * time.Millisecond) // lets the runtime drop what it still roots
		}
		runtime.GC()
		v := heapLiveBytes()
		least = min(least, v)
		if i > 0 && max(v, prev)-min(v, prev) <= v/1000 {
			break
		}
		prev = v
	}
	return least
}

// heapLiveBytes returns the heap the last collection marked live (objects
// allocated since do not count), or HeapAlloc where runtime/metrics lacks
// that metric.
func heapLiveBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		return s[0].Value.Uint64()
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
