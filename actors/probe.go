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

// inFlight is what a shard knows of a key it has callers of in flight.
type inFlight struct {
	fingerprint []byte
	leaseLeft   time.Duration
}

type probe struct {
	key   string
	reply chan probeReply
}

type probeReply struct {
	in inFlight
	ok bool
}

// InFlight reports whether the shard of key has callers of it in flight
// (a claim out, a run, its Complete or Release, or callers waiting for
// another instance), with what it knows of the key: the holder's
// fingerprint (this process's owner, or another instance's holder), or,
// while a claim is out, the claiming caller's (nil when none is known or
// none was given); and what is left of the holder's lease as the shard
// sees it, or, while a claim is out, the lease the claim asks for. It asks
// the actor: the answer comes after every message sent to the shard
// before. It returns store.ErrClosed when the shard is closing, or ctx's
// error.
func (set *Set) InFlight(ctx context.Context, key string) (fingerprint []byte, leaseLeft time.Duration, ok bool, err error) {
	s := set.shardOf(key)
	m := &probe{key: key, reply: make(chan probeReply, 1)}
	if !s.sendIfOpen(m) {
		return nil, 0, false, store.ErrClosed
	}
	select {
	case r := <-m.reply:
		return r.in.fingerprint, r.in.leaseLeft, r.ok, nil
	case <-ctx.Done():
		return nil, 0, false, ctx.Err()
	case <-s.done:
		return nil, 0, false, store.ErrClosed
	}
}

func (s *shard) onProbe(m *probe) {
	e := s.entries[m.key]
	if e == nil {
		in, ok := s.directInFlight(m.key, s.now())
		m.reply <- probeReply{in: in, ok: ok}
		return
	}
	in := inFlight{leaseLeft: s.leaseLeft(e)}
	switch e.phase {
	case phClaiming:
		if e.owner != nil {
			in.fingerprint, in.leaseLeft = e.owner.Fingerprint, e.owner.Lease
		}
	case phRunning, phLost, phFinishing, phRemote:
		in.fingerprint = e.fp
	}
	in.fingerprint = bytes.Clone(in.fingerprint) // the caller may keep it
	m.reply <- probeReply{in: in, ok: true}
}

func (*probe) IgnoreDeadLetterLogging() {}
