package main

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

func TestHistQuantiles(t *testing.T) {
	var h hist
	rng := rand.New(rand.NewPCG(1, 2))
	vals := make([]int64, 100000)
	for i := range vals {
		vals[i] = int64(rng.ExpFloat64() * 50000) // mean 50µs
		h.record(time.Duration(vals[i]))
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := vals[int(q*float64(len(vals)))-1]
		got := h.quantile(q)
		if float64(got) < float64(exact)*0.99 || float64(got) > float64(exact)*1.07+16 {
			t.Errorf("q%v: %d, exact %d", q, got, exact)
		}
	}
	s := h.summary()
	var total int64
	for _, c := range s.Counts {
		total += c
	}
	if total != int64(len(vals)) || len(s.Counts) != len(s.UpperUS) {
		t.Fatalf("chart buckets hold %d of %d values", total, len(vals))
	}
}

func TestBucketBounds(t *testing.T) {
	for _, ns := range []int64{0, 1, 15, 16, 17, 31, 32, 1000, 123456789, 1 << 40} {
		b := bucketOf(ns)
		if ns >= upperOf(b) || (b > 0 && ns < upperOf(b-1)) {
			t.Fatalf("%d in bucket %d: bounds [%d, %d)", ns, b, upperOf(b-1), upperOf(b))
		}
	}
}
