package actors

// How an owner's run ends: its Finish, the Complete that stores a result,
// the release after a transient failure, and their retries.

import (
	"errors"
	"time"

	"github.com/idemrt/idem/store"
)

func (s *Shard) onFinish(f *Finish) {
	r := f.Req
	e := s.entries[r.Key]
	if e == nil || e.owner != r || e.phase != phRunning {
		// The shard let go of this owner (its hard lease ended, or
		// shutdown): nothing can be stored, unless the owner stored it
		// itself and has its answer.
		switch {
		case f.Stored:
		case r.expired:
			s.reply(r, Reply{Kind: Failed, Code: FailLeaseLost, Op: store.OpComplete, Err: store.ErrLeaseLost})
		default:
			s.reply(r, Reply{Kind: Failed, Code: FailClosed})
		}
		return
	}
	s.timers.cancel(&e.timer)
	if f.Stored {
		// The owner completed the key itself and has its answer.
		r.where = nowhere
		e.owner = nil
		e.fin = f
		e.phase = phFinishing
		c := f.Result
		if c == &f.Own && len(e.waiters) > 0 {
			// The waiters keep it after r is reused: a copy of their own.
			c = new(Cached)
			*c = f.Own
		}
		s.stored(e, c, f.StoreErr)
		if s.entries[r.Key] != e || e.fin != f {
			// Nothing refers to r any more (unless a Complete the store
			// refused is to be retried from f, which lives in r).
			s.dropRequest(r)
		}
		return
	}
	if e.lost {
		s.reply(r, Reply{Kind: Failed, Code: FailLeaseLost, Op: store.OpRenew, Err: store.ErrLeaseLost})
		s.restart(e)
		return
	}
	switch f.Kind {
	case Success, Permanent:
		e.fin = f
		e.phase = phFinishing
		e.backoff = 0
		s.complete(e)
	case Panic:
		rep := Reply{Kind: Failed, Code: FailOwner, Err: f.Err}
		s.answerWaiters(e, rep)
		s.release(e, rep)
	default:
		s.handOff(e, Reply{Kind: Failed, Code: FailOwner, Err: f.Err})
	}
}

// handOff ends the run of e's owner, who failed transiently: the claim is
// released, and then the first waiter claims the key as a new owner (see
// restart). ownerReply is the owner's answer.
//
// The waiter is not given the owner's claim: that claim carries the owner's
// lease (what is left of it), renewal mode and fingerprint, and an answer
// to a renewal sent for the owner would still match its token. A fresh claim
// costs one store round trip on this rare path and makes every owner's
// lease its own.
func (s *Shard) handOff(e *entry, ownerReply Reply) { s.release(e, ownerReply) }

// release sends a Release for e's token; ownerReply goes to the owner (if any)
// once the store has answered.
func (s *Shard) release(e *entry, ownerReply Reply) {
	e.phase = phReleasing
	e.ownerReply = ownerReply
	e.backoff = 0
	s.timers.cancel(&e.timer)
	s.sendRelease(e)
}

func (s *Shard) sendRelease(e *entry) {
	o := s.newOp(e)
	o.Kind, o.Key, o.Token = store.OpRelease, e.key, e.token
	s.submit(o)
}

func (s *Shard) released(e *entry, o *op) {
	if e.owner != nil && e.ownerReply.Kind != 0 {
		s.reply(e.owner, e.ownerReply)
	}
	e.owner = nil
	if o.Err != nil && !store.IsContract(o.Err) {
		if !s.closing && s.now().Before(e.leaseAt.Add(e.lease)) {
			// The store may not have released the key, and until it does the
			// next claim would wait for this shard's own claim to end. A Release
			// with the same token is safe to repeat: retry while the lease
			// lasts. The waiters keep waiting.
			s.cfg.Logger.Warn("idem: releasing a key failed; retrying while the lease lasts", "key", e.key, "err", o.Err)
			s.retryLater(e)
			return
		}
		s.cfg.Logger.Warn("idem: releasing a key failed; it stays claimed until its lease ends",
			"key", e.key, "err", o.Err)
	}
	s.restart(e)
}

// retryLater repeats e's Complete or Release after a doubling backoff.
func (s *Shard) retryLater(e *entry) {
	e.backoff = min(max(2*e.backoff, 10*time.Millisecond), time.Second)
	e.timer.kind = timerRetry
	s.timers.schedule(&e.timer, s.now().Add(e.backoff))
	s.rearm()
}

func (s *Shard) complete(e *entry) {
	o := s.newOp(e)
	o.Kind, o.Key, o.Token, o.Record, o.TTL = store.OpComplete, e.key, e.token, e.fin.Record, e.ttl
	s.submit(o)
}

func (s *Shard) completed(e *entry, o *op) {
	f := e.fin
	var c *Cached
	if o.Err == nil {
		c = &Cached{Record: o.Result.Record, Value: f.Value, Err: f.Err}
	}
	s.stored(e, c, o.Err)
}

// stored ends a Complete: c is the stored result, or err why there is none.
// The owner, if it still waits, gets the answer; so do the waiters.
func (s *Shard) stored(e *entry, c *Cached, err error) {
	owner := e.owner
	if err == nil {
		s.remember(e, c)
		if owner != nil {
			s.reply(owner, Reply{Kind: Settled, Result: c})
			s.dropRequest(owner)
		}
		s.answerWaiters(e, Reply{Kind: Settled, Result: c, Joined: true})
		s.deleteEntry(e)
		return
	}
	if owner != nil {
		code := FailStore
		if errors.Is(err, store.ErrLeaseLost) {
			code = FailLeaseLost
		}
		s.reply(owner, Reply{Kind: Failed, Code: code, Op: store.OpComplete, Err: err})
		owner.where = nowhere
	}
	if errors.Is(err, store.ErrLeaseLost) || s.closing || !s.now().Before(e.leaseAt.Add(e.lease)) {
		s.restart(e)
		return
	}
	// The store may have failed before or after it wrote the record; a
	// Complete with the same token is safe to repeat, so keep trying while the
	// lease lasts. The waiters keep waiting for it.
	s.cfg.Logger.Warn("idem: storing a result failed; retrying while the lease lasts", "key", e.key, "err", err)
	e.owner = nil
	s.retryLater(e)
}
