package main

import (
	"math"
	"math/bits"
	"time"
)

// hist is a log-linear latency histogram: 16 linear sub-buckets per power
// of two of nanoseconds, so every value is placed within 6.25%. Recording
// is a few nanoseconds and allocates nothing; one hist per worker, merged
// at the end.
type hist struct {
	counts [64 * 16]int64
	n      int64
	sum    float64
	max    int64
}

func bucketOf(ns int64) int {
	if ns < 16 {
		return int(max(ns, 0))
	}
	e := bits.Len64(uint64(ns)) - 1 // 4..62
	sub := int((uint64(ns) >> (e - 4)) & 15)
	return (e-3)*16 + sub
}

// upperOf is the largest value that lands in bucket b, plus one.
func upperOf(b int) int64 {
	if b < 16 {
		return int64(b) + 1
	}
	e := b/16 + 3
	sub := int64(b % 16)
	return (16 + sub + 1) << (e - 4)
}

func (h *hist) record(d time.Duration) {
	ns := int64(d)
	h.counts[bucketOf(ns)]++
	h.n++
	h.sum += float64(ns)
	h.max = max(h.max, ns)
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// quantile returns the upper bound of the bucket holding quantile q, in ns.
func (h *hist) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	want := int64(math.Ceil(q * float64(h.n)))
	var seen int64
	for b, c := range h.counts {
		seen += c
		if seen >= want && c > 0 {
			return min(upperOf(b), h.max)
		}
	}
	return h.max
}

// summary turns h into the report's Latency, with a chart-sized histogram
// (10 buckets per decade of microseconds).
func (h *hist) summary() Latency {
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	l := Latency{Count: h.n}
	if h.n == 0 {
		return l
	}
	l.Mean = h.sum / float64(h.n) / 1e3
	l.P50, l.P90 = us(h.quantile(0.5)), us(h.quantile(0.9))
	l.P99, l.P999 = us(h.quantile(0.99)), us(h.quantile(0.999))
	l.Max = us(h.max)
	// Re-bucket into decades of µs for the report's charts.
	lo, hi := math.Inf(1), 0.0
	for b, c := range h.counts {
		if c > 0 {
			v := float64(upperOf(b)) / 1e3
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	start := math.Floor(math.Log10(math.Max(lo, 0.01))*10) / 10
	end := math.Ceil(math.Log10(math.Max(hi, 0.01))*10)/10 + 0.1
	for e := start + 0.1; e <= end+1e-9; e += 0.1 {
		l.UpperUS = append(l.UpperUS, math.Round(math.Pow(10, e)*1000)/1000)
	}
	l.Counts = make([]int64, len(l.UpperUS))
	for b, c := range h.counts {
		if c == 0 {
			continue
		}
		v := float64(upperOf(b)) / 1e3
		i := 0
		for i < len(l.UpperUS)-1 && v > l.UpperUS[i] {
			i++
		}
		l.Counts[i] += c
	}
	return l
}
