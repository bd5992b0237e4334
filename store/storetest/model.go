package storetest

import (
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

// modelKey is the reference model's view of one key.
type modelKey struct {
	state     string // "", "progress", "done"
	token     store.Token
	leaseEnd  ends // when the holder's lease ends
	leaseOver bool // set for one call: the lease had ended when it ran
	fp        []byte
	rec       store.Record
	recCall   time.Duration // how long the call that returned rec took
	recEnd    ends          // when the record ends
	lastFence uint64        // the largest fence handed out for the key, in any record
	attempt   uint32        // the holder's attempt (progress)
	tokens    []store.Token // every token the store handed out for the key
}

// ends is when a short lease or TTL ends, as far as the suite can tell: not
// before from, and surely by to. The store starts it at some instant of the
// call that asked for it; on real time the suite only knows the call's start
// and end (and the store rounds to milliseconds), so a later call that
// overlaps the window may find it live or ended. On a fake clock (Exact) time
// moves only in Advance, so from and to are the same instant. The zero value
// is a long lease or TTL, which never ends during a test.
type ends struct{ from, to time.Time }

type phase int

const (
	live phase = iota
	over
	unsure
)

// at tells whether a call that ran from b to a found e live, ended, or
// either.
func (e ends) at(b, a time.Time) phase {
	switch {
	case e.from.IsZero() || a.Before(e.from):
		return live
	case !b.Before(e.to):
		return over
	}
	return unsure
}

// model keeps the time the suite believes the store's clock shows: with an
// Exact harness, the sum of the Advance calls (nothing else moves a fake
// clock); otherwise the wall clock, which a store on real time shares.
type model struct {
	h       Harness
	virtual time.Time
	keys    map[string]*modelKey
}

func (m *model) now() time.Time {
	if m.h.Exact {
		return m.virtual
	}
	return time.Now()
}

func (m *model) advance(t testing.TB) {
	m.h.Advance(t, 2*m.h.Unit)
	m.virtual = m.virtual.Add(2 * m.h.Unit)
}

// grant returns when a lease or TTL of d, asked for by a call that ran from b
// to a, ends; a long one (short false) never does.
func (m *model) grant(d time.Duration, short bool, b, a time.Time) ends {
	if !short {
		return ends{}
	}
	slack := time.Duration(0)
	if !m.h.Exact {
		slack = m.h.Unit / 10 // millisecond rounding, the server's cached clock
	}
	return ends{from: b.Add(d - slack), to: a.Add(d + slack)}
}

func (m *model) key(k string) *modelKey {
	mk := m.keys[k]
	if mk == nil {
		mk = &modelKey{}
		m.keys[k] = mk
	}
	return mk
}

// worlds returns the states mk could have been in when a call ran from b to
// a: one, or, when its short lease or record may have ended during the call,
// the one where it had not and the one where it had.
func worlds(mk *modelKey, b, a time.Time) []modelKey {
	w := *mk
	w.leaseOver = false
	var p phase
	switch w.state {
	case "progress":
		p = w.leaseEnd.at(b, a)
	case "done":
		p = w.recEnd.at(b, a)
	default:
		return []modelKey{w}
	}
	ended := w
	if w.state == "progress" {
		ended.leaseOver = true
	} else {
		ended.state = ""
	}
	switch p {
	case live:
		return []modelKey{w}
	case over:
		return []modelKey{ended}
	}
	return []modelKey{w, ended}
}
