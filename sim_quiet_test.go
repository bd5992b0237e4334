package idem_test

import (
	"bytes"
	"runtime"
	"sync"
	"time"
)

// quiesce waits until nothing in the process moves: no goroutine but this
// one is runnable (from a dump of every goroutine's state), no store
// operation is being applied, and the simulation's progress counter, the
// runtimes' counters and the fake clock's timers did not change across the
// dump. A goroutine that is woken is made runnable by whoever wakes it, so
// once none is, nothing happens until the simulation acts or moves the
// clock (the runtimes use no real-time timers). It needs no hook in the
// runtime. Wake-ups the store sent are delivered here, one at a time.
func (w *simWorld) quiesce() {
	deadline := time.Now().Add(2 * time.Second)
	for spins := 0; time.Now().Before(deadline); spins++ {
		runtime.Gosched()
		if spins > 50 {
			time.Sleep(20 * time.Microsecond) // back off: the goroutines watched need the processor
		}
		before := w.snapshot()
		if w.busy.Load() != 0 || w.othersRunnable() || w.busy.Load() != 0 || w.snapshot() != before {
			continue
		}
		wk, ok := w.nextWake()
		if !ok {
			return
		}
		// Deliver the store's wake-ups one by one, each when the world
		// is quiet, so that runtimes woken at once do not race to claim.
		wk.fn(wk.key)
		w.bump()
		spins = 0
	}
	w.logf("(not quiet after 2s of real time; going on)")
}

type simSnapshot struct {
	progress                   int64
	timers                     int
	inFlight, waiters, pending int
	ops, batches               int64
	runtimes                   int
}

func (w *simWorld) snapshot() simSnapshot {
	s := simSnapshot{progress: w.progress.Load(), timers: w.clock.Timers()}
	w.mu.Lock()
	rts := w.rts
	w.mu.Unlock()
	for _, r := range rts {
		if r.rt == nil {
			continue
		}
		st := r.rt.Stats()
		s.inFlight += st.InFlight
		s.waiters += st.Waiters
		s.pending += st.Pending
		s.ops += st.Ops
		s.batches += st.Batches
		s.runtimes++
	}
	return s
}

var simStackBuf = struct {
	sync.Mutex
	b []byte
}{b: make([]byte, 1<<20)}

// othersRunnable reports whether a goroutine other than the caller is
// running or ready to run.
func (w *simWorld) othersRunnable() bool {
	simStackBuf.Lock()
	defer simStackBuf.Unlock()
	var n int
	for {
		n = runtime.Stack(simStackBuf.b, true)
		if n < len(simStackBuf.b) {
			break
		}
		simStackBuf.b = make([]byte, 2*len(simStackBuf.b))
	}
	dump := simStackBuf.b[:n]
	first := true
	for len(dump) > 0 {
		line := dump
		if i := bytes.IndexByte(dump, '\n'); i >= 0 {
			line, dump = dump[:i], dump[i+1:]
		} else {
			dump = nil
		}
		if !bytes.HasPrefix(line, []byte("goroutine ")) {
			continue
		}
		if first {
			first = false // the caller's own
			continue
		}
		i := bytes.IndexByte(line, '[')
		if i < 0 {
			continue
		}
		state := line[i+1:]
		if j := bytes.IndexAny(state, ",]"); j >= 0 {
			state = state[:j]
		}
		if bytes.Equal(state, []byte("runnable")) || bytes.Equal(state, []byte("running")) {
			return true
		}
	}
	return false
}

// simCtx is a caller's context whose deadline is in fake time: the
// simulation ends it when the fake clock reaches the deadline (or cancels
// it). Its Deadline is reported, so a runtime that derives a context from
// it sees the deadline too.
type simCtx struct {
	deadline time.Time
	done     chan struct{}
	mu       sync.Mutex
	err      error
}

func newSimCtx(deadline time.Time) *simCtx {
	return &simCtx{deadline: deadline, done: make(chan struct{})}
}

func (c *simCtx) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }
func (c *simCtx) Done() <-chan struct{}       { return c.done }
func (c *simCtx) Value(any) any               { return nil }

func (c *simCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// end ends the context with err, once; it reports whether it did.
func (c *simCtx) end(err error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return false
	}
	c.err = err
	close(c.done)
	return true
}
