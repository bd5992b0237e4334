// Package clock is the source of time for idem: the lease, result TTL and settle
// timers of a runtime and of the in-memory store all read it.
//
// Production code uses [Real]. Tests use [Fake], whose time moves only when the
// test calls [Fake.Advance], so TTL expiry, lease takeover and settle timeouts are
// tested without sleeping.
package clock

import "time"

// Clock tells the time and runs functions later.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed, unless the
	// returned Timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending call made by [Clock.AfterFunc].
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it did.
	Stop() bool
}

// Real returns the clock of the time package.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
