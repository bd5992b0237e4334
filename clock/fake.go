package clock

import (
	"sort"
	"sync"
	"time"
)

// Fake is a [Clock] whose time moves only when told to. It is safe for
// concurrent use. Functions scheduled with AfterFunc run synchronously inside
// [Fake.Advance] (or [Fake.Set]), in deadline order, outside the clock's lock.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	target time.Time // the latest time asked for by Advance or Set
	seq    uint64
	timers []*fakeTimer
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

type fakeTimer struct {
	c    *Fake
	at   time.Time
	seq  uint64
	f    func()
	done bool
}

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f to run when the fake time reaches Now()+d. A d of zero
// or less still waits for the next Advance or Set.
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

// Stop cancels the timer; it reports whether the call was still pending.
func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			break
		}
	}
	return true
}

// Advance moves the time forward by d and runs every timer that falls due.
// Concurrent Advances add up: each moves the target left by the others.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	if c.target.Before(c.now) {
		c.target = c.now
	}
	if d > 0 {
		c.target = c.target.Add(d)
	}
	target := c.target
	c.mu.Unlock()
	c.Set(target)
}

// Set moves the time to t (never backwards) and runs every timer that falls
// due, each with the clock reading its own deadline.
func (c *Fake) Set(t time.Time) {
	c.mu.Lock()
	if t.After(c.target) {
		c.target = t
	}
	c.mu.Unlock()
	for {
		c.mu.Lock()
		sort.Slice(c.timers, func(i, j int) bool {
			a, b := c.timers[i], c.timers[j]
			if a.at.Equal(b.at) {
				return a.seq < b.seq
			}
			return a.at.Before(b.at)
		})
		if len(c.timers) == 0 || c.timers[0].at.After(t) {
			if t.After(c.now) {
				c.now = t
			}
			c.mu.Unlock()
			return
		}
		next := c.timers[0]
		c.timers = c.timers[1:]
		next.done = true
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.mu.Unlock()
		next.f()
	}
}

// Timers returns how many timers are pending. Tests use it to wait until the
// code under test has armed the timer they are about to fire.
func (c *Fake) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}
