package actors

// Asking a shard about a key it has callers of in flight: a runtime's Get
// and State do, when the store holds nothing for the key yet (its claim is
// on the way).

import (
	"bytes"
	"context"
	"time"

	"github.com/idemrt/idem/store"
)

// InFlight is what a shard knows of a key it has callers of in flight.
type InFlight struct {
	// Fingerprint is the holder's fingerprint (this process's owner, or
	// another instance's holder), or, while a claim is out, the claiming
	// caller's; nil when none is known (a failed owner's claim being
	// released) or none was given.
	Fingerprint []byte
	// LeaseLeft is what is left of the holder's lease as the shard sees
	// it, or, while a claim is out, the lease the claim asks for.
	LeaseLeft time.Duration
}

type probe struct {
	key   string
	reply chan probeReply
}

type probeReply struct {
	in InFlight
	ok bool
}

// InFlight reports whether the shard has callers of key in flight (a
// claim out, a run, its Complete or Release, or callers waiting for
// another instance), with what it knows of the key. It asks the actor:
// the answer comes after every message sent to the shard before. It
// returns store.ErrClosed when the shard is closing, or ctx's error.
func (s *Shard) InFlight(ctx context.Context, key string) (InFlight, bool, error) {
	m := &probe{key: key, reply: make(chan probeReply, 1)}
	if !s.sendIfOpen(m) {
		return InFlight{}, false, store.ErrClosed
	}
	select {
	case r := <-m.reply:
		return r.in, r.ok, nil
	case <-ctx.Done():
		return InFlight{}, false, ctx.Err()
	case <-s.done:
		return InFlight{}, false, store.ErrClosed
	}
}

func (s *Shard) onProbe(m *probe) {
	e := s.entries[m.key]
	if e == nil {
		m.reply <- probeReply{}
		return
	}
	in := InFlight{LeaseLeft: s.leaseLeft(e)}
	switch e.phase {
	case phClaiming:
		if e.owner != nil {
			in.Fingerprint, in.LeaseLeft = e.owner.Fingerprint, e.owner.Lease
		}
	case phRunning, phFinishing, phRemote:
		in.Fingerprint = e.fp
	}
	in.Fingerprint = bytes.Clone(in.Fingerprint) // the caller may keep it
	m.reply <- probeReply{in: in, ok: true}
}

func (*probe) IgnoreDeadLetterLogging() {}
