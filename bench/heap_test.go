package main

import (
	"math"
	"strings"
	"testing"
)

// readings returns a heap reader that returns vs in turn.
func readings(vs ...uint64) func() uint64 {
	return func() uint64 {
		v := vs[0]
		vs = vs[1:]
		return v
	}
}

// A heap figure is the median of its rounds, each the growth between its
// own two readings; done is called after the second.
func TestHeapMeterMedian(t *testing.T) {
	var made, added, released int
	hm := heapMeter{rounds: 3, read: readings(1000, 2000, 2000, 4000, 4000, 5500)}
	f, err := hm.measure(10, func(round int) (heapRound, error) {
		if round != made || added != made || released != made {
			t.Fatalf("round %d: %d made, %d added, %d released", round, made, added, released)
		}
		made++
		return heapRound{add: func() error { added++; return nil }, done: func() { released++ }}, nil
	})
	if err != nil || f.PerUnit != 150 || f.Unsound != "" || f.Dropped != 0 || len(f.Rounds) != 3 || released != 3 {
		t.Fatalf("%+v, %v, %d released", f, err, released)
	}
}

// A round whose heap shrank or stayed (a free of other memory fell in it)
// is dropped and run again; without enough rounds that grew, the figure
// is unsound, 0 and never negative.
func TestHeapMeterDropsShrunkRounds(t *testing.T) {
	add := func(int) (heapRound, error) { return heapRound{add: func() error { return nil }}, nil }
	hm := heapMeter{rounds: 3, read: readings(26000, 16000, 4000, 5000, 5000, 5000, 5000, 6000, 6000, 7200)}
	f, err := hm.measure(10, add)
	if err != nil || f.PerUnit != 100 || f.Dropped != 2 || f.Unsound != "" || len(f.Rounds) != 3 {
		t.Fatalf("%+v, %v", f, err)
	}
	hm = heapMeter{rounds: 3, read: readings(9000, 8000, 8000, 8000, 1000, 9000, 9000, 8500, 8500, 9000, 9000, 8000)}
	f, err = hm.measure(10, add)
	if err != nil || f.PerUnit != 0 || f.Dropped != 4 || len(f.Rounds) != 2 || !strings.Contains(f.Unsound, "4 of 6 rounds") {
		t.Fatalf("%+v, %v", f, err)
	}
	if _, err := (heapMeter{rounds: 3, read: readings()}).measure(0, add); err == nil {
		t.Fatal("no units: no error")
	}
}

// On the real heap, units of a known size measure as that size: 4,000
// slices of 1 KiB, each its own allocation, plus the 24-byte header that
// holds each.
func TestHeapMeterKnownSize(t *testing.T) {
	const n, size = 4000, 1024
	var held [][]byte
	hm := heapMeter{rounds: 3, read: liveHeap}
	f, err := hm.measure(n, func(int) (heapRound, error) {
		return heapRound{
			add: func() error {
				held = make([][]byte, n)
				for i := range held {
					held[i] = make([]byte, size)
				}
				return nil
			},
			done: func() { held = nil },
		}, nil
	})
	if err != nil || f.Unsound != "" || f.PerUnit < size || f.PerUnit > size*1.25 || math.IsNaN(f.PerUnit) {
		t.Fatalf("%+v, %v: want about %d B per unit", f, err, size+24)
	}
}

// An unsound figure is printed as such, with its reason: never a number.
func TestPrintSizesUnsound(t *testing.T) {
	var b strings.Builder
	printSizes(&b, []Sizes{{System: "idem", Rounds: 3, BytesPerRecord: 820, RecordRounds: []float64{830, 820, 810}, RecordDropped: 1,
		InFlightDropped: 4, InFlightUnsound: "the heap did not grow in 4 of 6 rounds: other memory was freed meanwhile"}})
	out := b.String()
	for _, want := range []string{"not measured (the heap did not grow in 4 of 6 rounds", "820 B per stored record", "median of 3 rounds",
		"5 rounds run again"} {
		if !strings.Contains(out, want) {
			t.Errorf("%q lacks %q", out, want)
		}
	}
	if strings.Contains(out, "0 per key") || strings.Contains(out, "-") {
		t.Errorf("%q: a number for the unsound figure", out)
	}
}
