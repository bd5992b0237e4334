package main

import (
	"context"
	"math"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The workload's own cost: every call of a run builds its key, and the
// benchmarked function builds its result's ID, allocations that every
// system's allocs/op includes. workloadAllocs measures them, so that a
// target can bound what a system allocates itself.

// keyString returns prefix followed by id in decimal, in one allocation.
func keyString(prefix string, id int64) string {
	var buf [96]byte
	return string(strconv.AppendInt(append(buf[:0], prefix...), id, 10))
}

// isKeyString reports whether s is keyString(prefix, id), allocating
// nothing.
func isKeyString(s, prefix string, id int64) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	var buf [24]byte
	return ok && string(strconv.AppendInt(buf[:0], id, 10)) == rest
}

// directSystem runs the function on every call: the workload alone.
type directSystem struct{}

func (directSystem) name() string { return "direct" }

func (directSystem) do(ctx context.Context, _ string, fn workFn, _ bool) (receipt, outcome, error) {
	v, err := fn(ctx)
	return v, executed, err
}

func (directSystem) storeCalls() (int64, int64) { return 0, 0 }
func (directSystem) close()                     {}

// workloadAllocs returns the allocations per call of the unique scenario's
// workload on its own (calls of the direct system), with a key prefix as
// long as the runs'. The count is the process's, so another goroutine's
// allocations can only add to it: it is the least of three passes.
func workloadAllocs(prefix string) float64 {
	const calls, passes = 4000, 3
	w := newWorker(newTracker(), 0)
	ctx := context.Background()
	least := math.Inf(1)
	for pass := range passes {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for id := int64(pass*calls + 1); id <= int64((pass+1)*calls); id++ {
			w.call(ctx, directSystem{}, prefix, id, false, time.Now())
		}
		runtime.ReadMemStats(&after)
		least = min(least, float64(after.Mallocs-before.Mallocs)/calls)
	}
	return least
}
