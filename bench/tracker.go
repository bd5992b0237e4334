package main

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// epoch is what the tracker's doneAt counts from: durations since it use the
// monotonic clock, which a Unix-ns timestamp (wall time) does not carry,
// so a clock step during a run cannot skew the settle latencies.
var epoch = time.Now()

// sinceEpoch is now as the tracker's doneAt holds it, never 0 (0 is "not
// done yet").
func sinceEpoch() int64 { return max(int64(time.Since(epoch)), 1) }

// tracker counts the executions of each key of a run and when each key's
// function last returned, indexed by key id. Pages are created on demand.
type tracker struct {
	mu    sync.Mutex
	pages []atomic.Pointer[keyPage]
}

const pageBits = 12

type keyPage [1 << pageBits]keySlot

type keySlot struct {
	execs  atomic.Int32
	ok     atomic.Bool  // some call got the key's result
	doneAt atomic.Int64 // ns since epoch, monotonic
	owner  atomic.Int32 // 1 + the instance whose execution set doneAt (xstorm)
}

func newTracker() *tracker { return &tracker{pages: make([]atomic.Pointer[keyPage], 1<<16)} }

func (t *tracker) slot(id int64) *keySlot {
	pi := id >> pageBits
	if pi >= int64(len(t.pages)) {
		panic(fmt.Sprintf("bench: key id %d beyond the tracker's capacity; shorten -duration", id))
	}
	p := t.pages[pi].Load()
	if p == nil {
		t.mu.Lock()
		if p = t.pages[pi].Load(); p == nil {
			p = new(keyPage)
			t.pages[pi].Store(p)
		}
		t.mu.Unlock()
	}
	return &p[id&(1<<pageBits-1)]
}
