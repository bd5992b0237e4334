package actors

// How an entry gets its owner: the claim, the grant, the hard lease that
// lets an owner go, a new claim for the next waiter, and wake-ups for keys
// held elsewhere.

import (
	"errors"

	"github.com/idemrt/idem/store"
)

// claim sends a Claim for e's candidate.
func (s *Shard) claim(e *entry) {
	r := e.owner
	e.phase = phClaiming
	e.woken = false
	o := s.newOp(e)
	o.Kind, o.Key = store.OpClaim, e.key
	o.Claim = store.ClaimRequest{
		Owner:       s.newOwner(),
		Lease:       r.Lease,
		TTL:         r.TTL,
		Fingerprint: r.Fingerprint,
		Waiter:      s.cfg.wakerID,
	}
	s.submit(o)
}

// claimed handles the answer to e's Claim: the key is its candidate's now,
// or it has a result, or another instance holds it.
func (s *Shard) claimed(e *entry, o *op) {
	candidate := e.owner
	e.owner = nil
	if o.Err != nil {
		s.warnStore("claim", e.key, o.Err)
		s.claimFailed(e, candidate, o.Err)
		return
	}
	switch res := &o.Result; res.Status {
	case store.Completed:
		s.claimFoundResult(e, candidate, res.Record)
	case store.Claimed:
		s.claimGranted(e, candidate, o)
	case store.InProgress:
		s.claimFoundHolder(e, candidate, res)
	default:
		s.claimFailed(e, candidate, errors.New("store returned an unknown claim status"))
	}
}

// claimFailed gives the candidate and every waiter err, and forgets e.
func (s *Shard) claimFailed(e *entry, candidate *Request, err error) {
	rep := Reply{Kind: Failed, Code: FailStore, Op: store.OpClaim, Err: err}
	s.reply(candidate, rep)
	s.answerWaiters(e, rep)
	s.deleteEntry(e)
}

// claimFoundResult gives the candidate and every waiter the key's result.
func (s *Shard) claimFoundResult(e *entry, candidate *Request, rec store.Record) {
	if !s.now().Before(rec.ExpiresAt) && !e.askedAgain {
		// The record ended while the answer was on its way: callers that
		// came since never saw it live. Ask once more (the store now finds
		// the key absent, or a new run's record).
		e.askedAgain = true
		if candidate.where == claiming {
			e.owner = candidate
			s.claim(e)
		} else {
			s.restart(e)
		}
		return
	}
	c := &Cached{Record: rec}
	s.remember(e, c)
	rep := Reply{Kind: Settled, Result: c, Joined: e.waited}
	s.reply(candidate, rep)
	s.dropRequest(candidate)
	s.answerWaiters(e, rep)
	s.deleteEntry(e)
}

// claimGranted grants the key to the candidate whose claim the store
// granted, if it still waits.
func (s *Shard) claimGranted(e *entry, candidate *Request, o *op) {
	e.token, e.lease, e.leaseAt = o.Result.Token, o.Claim.Lease, o.sent
	e.fp = nil
	if candidate.where != claiming || s.closing {
		// The candidate left (or the runtime is closing): the claim
		// carries its fingerprint and lease, so it is released, and the
		// next waiter claims with its own.
		if s.closing {
			s.answerWaiters(e, Reply{Kind: Failed, Code: FailClosed})
		}
		s.release(e, Reply{})
		return
	}
	s.grant(e, candidate)
}

// claimFoundHolder parks the candidate, first in line, behind the other
// instance that holds the key, and arms the re-claim.
func (s *Shard) claimFoundHolder(e *entry, candidate *Request, res *store.ClaimResult) {
	e.phase = phRemote
	e.waited = true
	e.token, e.fp = res.Token, res.Fingerprint
	e.left, e.leaseAt = res.LeaseLeft, s.now()
	if candidate.where == claiming {
		candidate.where = parked
		e.waiters = append(e.waiters, nil)
		copy(e.waiters[1:], e.waiters)
		e.waiters[0] = candidate
		s.armSettle(e, candidate)
		s.nWaiters.Add(1)
	}
	s.filter(e)
	if candidate.where == parked {
		candidate.waited = true // it stays: it waits for the other instance
	}
	switch {
	case len(e.waiters) == 0:
		s.deleteEntry(e)
	case e.woken:
		// The key settled while this claim was out: ask again now, as a
		// wake-up does.
		s.wakeEntry(e)
	default:
		s.scheduleReclaim(e)
	}
}

// grant makes owner the owner of e and tells it to run. Only a claim of
// the owner's own grants it the key: its token, lease, renewal mode and
// fingerprint are its own, never inherited from an earlier owner.
func (s *Shard) grant(e *entry, owner *Request) {
	e.phase = phRunning
	e.owner = owner
	e.ttl = owner.TTL
	e.lost = false
	e.fp = owner.Fingerprint
	s.filter(e)
	s.reply(owner, Reply{Kind: Grant, Token: e.token})
	owner.where = owning
	if owner.NoRenew {
		// A hard lease: when it ends, the key goes to the next caller.
		e.timer.kind = timerLeaseEnd
		s.timers.schedule(&e.timer, e.leaseAt.Add(e.lease))
		s.rearm()
		return
	}
	s.scheduleRenew(e, e.leaseAt)
}

// leaseEnded reports whether e's owner runs under a hard lease (no
// renewal) that has ended.
func (s *Shard) leaseEnded(e *entry) bool {
	return e.phase == phRunning && e.owner != nil && e.owner.NoRenew &&
		!s.now().Before(e.leaseAt.Add(e.lease))
}

// letGo takes the key from an owner whose hard lease ended, when callers
// wait for it: its function is told to stop, its result will be refused
// with ErrLeaseLost, and the next caller claims the key (a takeover, since
// the store's lease has ended too).
func (s *Shard) letGo(e *entry) {
	if len(e.waiters) == 0 {
		return // nobody to hand it to; a caller that comes later will
	}
	owner := e.owner
	owner.expired = true
	owner.stop(store.ErrLeaseLost)
	s.cfg.Logger.Warn("idem: a function outlived its lease (no renewal); the key is taken over", "key", e.key)
	s.restart(e)
}

// restart claims the key again for the next waiter, or forgets the entry
// when none is left. What the last holder left (its owner, timer, lost
// lease and finish) goes first: a new claim starts from nothing. It also
// re-claims a key held elsewhere, whose timer is the re-claim's.
func (s *Shard) restart(e *entry) {
	s.timers.cancel(&e.timer)
	e.owner, e.lost, e.fin = nil, false, nil
	if s.closing {
		s.answerWaiters(e, Reply{Kind: Failed, Code: FailClosed})
	}
	next := s.takeWaiter(e)
	if next == nil {
		s.deleteEntry(e)
		return
	}
	e.owner = next
	e.fp = nil
	s.claim(e)
}

// onWake handles a store wake-up for key, or for every key ("": wake-ups
// may have been lost).
func (s *Shard) onWake(key string) {
	if key != "" {
		if e := s.entries[key]; e != nil {
			s.wakeEntry(e)
		}
		return
	}
	for _, e := range s.entries {
		s.wakeEntry(e)
	}
}

// wakeEntry re-claims a key held elsewhere at once, or, while a claim is
// out, remembers to ask again when it comes back in progress.
func (s *Shard) wakeEntry(e *entry) {
	switch e.phase {
	case phRemote:
		e.backoff = 0
		s.restart(e)
	case phClaiming:
		e.woken = true
	}
}
