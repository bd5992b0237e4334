package actors

import (
	"bytes"
	"errors"
	"time"

	"github.com/idemrt/idem/store"
)

type phase uint8

const (
	phClaiming  phase = iota + 1 // a Claim is out for entry.owner (the candidate)
	phRunning                    // entry.owner runs its function
	phFinishing                  // the owner's Complete is out (or waits to be retried)
	phReleasing                  // the owner's Fail is out
	phRemote                     // another instance holds the key
)

// entry is the shard's state for one key with callers in flight.
type entry struct {
	key     string
	phase   phase
	owner   *Request // candidate while claiming, owner after a Grant
	token   store.Token
	fp      []byte // the holder's fingerprint, when known
	lease   time.Duration
	ttl     time.Duration
	leaseAt time.Time // when the holder's lease was last granted or renewed
	left    time.Duration
	waiters []*Request
	timer   timerItem // renewal (running), retry (finishing) or re-claim (remote)
	settleT timerItem // the earliest deadline of the waiters (and candidate)
	backoff time.Duration
	lost    bool
	waited  bool // the key was seen in progress elsewhere: its callers joined a run
	woken   bool // a store wake-up came while a claim was out
	fin     *Finish
	ownerAn Reply // the owner's answer once a release is done
	ops     int   // store operations of the entry in flight
}

func (s *Shard) newEntry(key string) *entry {
	var e *entry
	if n := len(s.freeEntries); n > 0 {
		e = s.freeEntries[n-1]
		s.freeEntries = s.freeEntries[:n-1]
	} else {
		e = new(entry)
	}
	e.key = key
	e.timer = timerItem{idx: -1, e: e}
	e.settleT = timerItem{idx: -1, kind: timerSettle, e: e}
	s.entries[key] = e
	s.nEntries.Add(1)
	return e
}

func (s *Shard) deleteEntry(e *entry) {
	if s.entries[e.key] != e {
		return
	}
	s.timers.cancel(&e.timer)
	s.timers.cancel(&e.settleT)
	delete(s.entries, e.key)
	s.nEntries.Add(-1)
	// Reuse the entry, unless an operation still refers to it (its result
	// will find the key gone and be dropped).
	if e.ops == 0 && len(s.freeEntries) < maxFree {
		waiters := e.waiters[:0]
		*e = entry{waiters: waiters}
		s.freeEntries = append(s.freeEntries, e)
	}
	s.checkDrained()
}

// mismatch reports whether two fingerprints are both set and differ.
func mismatch(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && !bytes.Equal(a, b)
}

func (s *Shard) onRequest(r *Request) {
	if s.closing {
		s.reply(r, Reply{Kind: Failed, Code: FailClosed})
		return
	}
	// The caller looked in the LRU before sending, but a key may have
	// completed since (its owner's Finish came first in this mailbox).
	if c := s.Lookup(r.Key, s.now()); c != nil {
		s.reply(r, Reply{Kind: Settled, Result: c})
		return
	}
	e := s.entries[r.Key]
	if e == nil {
		e = s.newEntry(r.Key)
		e.owner, r.where = r, candidate
		s.claim(e)
		return
	}
	switch e.phase {
	case phRunning, phFinishing, phRemote:
		if mismatch(e.fp, r.Fingerprint) {
			s.reply(r, Reply{Kind: Failed, Code: FailMismatch})
			return
		}
		if r.Settle == 0 && !s.leaseEnded(e) {
			s.reply(r, s.conflict(e))
			return
		}
	case phReleasing:
		// A failed owner's claim is being released (perhaps retried for
		// a while): the key is still held. A caller that may not wait is
		// told so; the fingerprint is checked against the next owner's,
		// when it is granted.
		if r.Settle == 0 {
			s.reply(r, s.conflict(e))
			return
		}
	}
	s.park(e, r)
	if s.leaseEnded(e) {
		s.letGo(e)
	}
}

// conflict is the answer to a caller that may not wait for e any longer.
func (s *Shard) conflict(e *entry) Reply {
	return Reply{Kind: Failed, Code: FailConflict, LeaseLeft: s.leaseLeft(e)}
}

func (s *Shard) leaseLeft(e *entry) time.Duration {
	var left time.Duration
	switch e.phase {
	case phRunning, phFinishing, phReleasing:
		left = e.lease - s.now().Sub(e.leaseAt)
	case phRemote:
		left = e.left - s.now().Sub(e.leaseAt)
	}
	return max(left, 0)
}

// park queues r on e and starts its settle time.
func (s *Shard) park(e *entry, r *Request) {
	r.where = parked
	r.waited = true
	e.waiters = append(e.waiters, r)
	s.armSettle(e, r)
	s.nWaiters.Add(1) // after armSettle: a test that sees the waiter sees its timer
}

// armSettle starts r's settle time, once, and makes sure e's settle timer
// fires no later than r's deadline.
func (s *Shard) armSettle(e *entry, r *Request) {
	if !r.deadline.IsZero() || r.Settle <= 0 || r.Settle == Forever {
		return
	}
	r.deadline = s.now().Add(r.Settle)
	if e.settleT.idx < 0 || r.deadline.Before(e.settleT.at) {
		s.timers.schedule(&e.settleT, r.deadline)
		s.rearm()
	}
}

// settleDue answers the callers of e whose settle time has ended, then
// arms e's settle timer for the earliest deadline left.
func (s *Shard) settleDue(e *entry) {
	now := s.now()
	var next time.Time
	kept := e.waiters[:0]
	for _, w := range e.waiters {
		if !w.deadline.IsZero() && !now.Before(w.deadline) {
			s.reply(w, s.conflict(e))
			s.nWaiters.Add(-1)
			continue
		}
		kept = append(kept, w)
		if !w.deadline.IsZero() && (next.IsZero() || w.deadline.Before(next)) {
			next = w.deadline
		}
	}
	clear(e.waiters[len(kept):])
	e.waiters = kept
	if c := e.owner; c != nil && c.where == candidate && !c.deadline.IsZero() {
		if !now.Before(c.deadline) {
			s.reply(c, s.conflict(e))
			c.where = gone
		} else if next.IsZero() || c.deadline.Before(next) {
			next = c.deadline
		}
	}
	if !next.IsZero() {
		s.timers.schedule(&e.settleT, next)
		s.rearm()
	}
	if e.phase == phRemote && len(e.waiters) == 0 {
		s.deleteEntry(e)
	}
}

// takeWaiter removes and returns e's first waiter as the next candidate;
// its settle time keeps running until it is granted the key.
func (s *Shard) takeWaiter(e *entry) *Request {
	if len(e.waiters) == 0 {
		return nil
	}
	r := e.waiters[0]
	e.waiters[0] = nil
	e.waiters = e.waiters[1:]
	s.nWaiters.Add(-1)
	r.where = candidate
	return r
}

// dropWaiter removes r from e's waiters.
func (s *Shard) dropWaiter(e *entry, r *Request) {
	for i, w := range e.waiters {
		if w == r {
			copy(e.waiters[i:], e.waiters[i+1:])
			e.waiters[len(e.waiters)-1] = nil
			e.waiters = e.waiters[:len(e.waiters)-1]
			s.nWaiters.Add(-1)
			break
		}
	}
	r.where = nowhere
}

// failWaiters answers every waiter of e with rep.
func (s *Shard) failWaiters(e *entry, rep Reply) {
	for _, w := range e.waiters {
		s.reply(w, rep)
	}
	s.nWaiters.Add(-int64(len(e.waiters)))
	clear(e.waiters)
	e.waiters = e.waiters[:0]
}

// settleWaiters gives every waiter of e the key's result.
func (s *Shard) settleWaiters(e *entry, c *Cached, joined bool) {
	for _, w := range e.waiters {
		s.reply(w, Reply{Kind: Settled, Result: c, Joined: joined})
	}
	s.nWaiters.Add(-int64(len(e.waiters)))
	clear(e.waiters)
	e.waiters = e.waiters[:0]
}

// filter answers, and removes, the waiters that cannot wait for the holder
// of e: a different fingerprint, or no settle time.
func (s *Shard) filter(e *entry) {
	kept := e.waiters[:0]
	for _, w := range e.waiters {
		switch {
		case mismatch(e.fp, w.Fingerprint):
			s.reply(w, Reply{Kind: Failed, Code: FailMismatch})
		case w.Settle == 0:
			s.reply(w, s.conflict(e))
		default:
			kept = append(kept, w)
			continue
		}
		s.nWaiters.Add(-1)
	}
	clear(e.waiters[len(kept):])
	e.waiters = kept
}

// claim sends a Claim for e's candidate.
func (s *Shard) claim(e *entry) {
	r := e.owner
	e.phase = phClaiming
	e.woken = false
	o := s.newOp(e)
	o.Kind, o.Key = store.OpClaim, e.key
	o.Claim = store.ClaimRequest{
		Owner:       s.cfg.NewOwner(),
		Lease:       r.Lease,
		TTL:         r.TTL,
		Fingerprint: r.Fingerprint,
		Waiter:      s.cfg.WakerID,
	}
	s.submit(o)
}

func (s *Shard) claimed(e *entry, o *op) {
	cand := e.owner
	e.owner = nil
	if o.Err != nil {
		s.warnStore("claim", e.key, o.Err)
		rep := Reply{Kind: Failed, Code: FailStore, Op: store.OpClaim, Err: o.Err}
		s.reply(cand, rep)
		s.failWaiters(e, rep)
		s.deleteEntry(e)
		return
	}
	res := o.Result
	switch res.Status {
	case store.Completed:
		c := &Cached{Record: res.Record}
		s.remember(e.key, c)
		s.reply(cand, Reply{Kind: Settled, Result: c, Joined: e.waited})
		s.settleWaiters(e, c, e.waited)
		s.deleteEntry(e)
	case store.Claimed:
		e.token, e.lease, e.leaseAt = res.Token, o.Claim.Lease, o.sent
		e.fp = nil
		if cand.where != candidate || s.closing {
			// The candidate left (or the runtime is closing): the claim
			// carries its fingerprint and lease, so it is released, and the
			// next waiter claims with its own.
			if s.closing {
				s.failWaiters(e, Reply{Kind: Failed, Code: FailClosed})
			}
			s.release(e, Reply{})
			return
		}
		s.grant(e, cand)
	case store.InProgress:
		e.phase = phRemote
		e.waited = true
		e.token, e.fp = res.Token, res.Fingerprint
		e.left, e.leaseAt = res.LeaseLeft, s.now()
		if cand.where == candidate {
			cand.where = parked
			e.waiters = append(e.waiters, nil)
			copy(e.waiters[1:], e.waiters)
			e.waiters[0] = cand
			s.armSettle(e, cand)
			s.nWaiters.Add(1)
		}
		s.filter(e)
		if cand.where == parked {
			cand.waited = true // it stays: it waits for the other instance
		}
		if len(e.waiters) == 0 {
			s.deleteEntry(e)
			return
		}
		if e.woken {
			// The key settled while this claim was out: ask again now.
			e.backoff = 0
			s.reclaim(e)
			return
		}
		s.scheduleReclaim(e)
	default:
		rep := Reply{Kind: Failed, Code: FailStore, Op: store.OpClaim, Err: errors.New("store returned an unknown claim status")}
		s.reply(cand, rep)
		s.failWaiters(e, rep)
		s.deleteEntry(e)
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
	e.owner = nil
	s.timers.cancel(&e.timer)
	s.restart(e)
}

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
		s.stored(e, f.Result, f.StoreErr)
		return
	}
	if e.lost {
		s.reply(r, Reply{Kind: Failed, Code: FailLeaseLost, Op: store.OpExtend, Err: store.ErrLeaseLost})
		e.owner = nil
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
		s.failWaiters(e, rep)
		s.release(e, rep)
	default:
		s.handOff(e, Reply{Kind: Failed, Code: FailOwner, Err: f.Err})
	}
}

// handOff ends the run of e's owner, who failed transiently: the claim is
// released, and then the first waiter claims the key as a new owner (see
// restart). ownerAn is the owner's answer.
//
// The waiter is not given the owner's claim: that claim carries the owner's
// lease (what is left of it), renewal mode and fingerprint, and an answer
// to a renewal sent for the owner would still match its token. A fresh claim
// costs one store round trip on this rare path and makes every owner's
// lease its own.
func (s *Shard) handOff(e *entry, ownerAn Reply) { s.release(e, ownerAn) }

// release sends a Fail for e's token; ownerAn goes to the owner (if any)
// once the store has answered.
func (s *Shard) release(e *entry, ownerAn Reply) {
	e.phase = phReleasing
	e.ownerAn = ownerAn
	e.backoff = 0
	s.timers.cancel(&e.timer)
	s.sendFail(e)
}

func (s *Shard) sendFail(e *entry) {
	o := s.newOp(e)
	o.Kind, o.Key, o.Token = store.OpFail, e.key, e.token
	s.submit(o)
}

func (s *Shard) released(e *entry, o *op) {
	if e.owner != nil && e.ownerAn.Kind != 0 {
		s.reply(e.owner, e.ownerAn)
	}
	e.owner = nil
	if o.Err != nil && !store.IsContract(o.Err) {
		if !s.closing && s.now().Before(e.leaseAt.Add(e.lease)) {
			// The store may not have released the key, and until it does the
			// next claim would wait for this shard's own claim to end. A Fail
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

// retryLater repeats e's Complete or Fail after a doubling backoff.
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
		s.remember(e.key, c)
		if owner != nil {
			s.reply(owner, Reply{Kind: Settled, Result: c})
		}
		s.settleWaiters(e, c, true)
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
		e.owner, e.fin = nil, nil
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

// restart claims the key again for the next waiter, or forgets the entry.
func (s *Shard) restart(e *entry) {
	e.lost, e.fin = false, nil
	if s.closing {
		s.failWaiters(e, Reply{Kind: Failed, Code: FailClosed})
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

// reclaim asks the store again about a key held elsewhere.
func (s *Shard) reclaim(e *entry) {
	s.timers.cancel(&e.timer)
	next := s.takeWaiter(e)
	if next == nil {
		s.deleteEntry(e)
		return
	}
	e.owner = next
	s.claim(e)
}

func (s *Shard) onWake(key string) {
	if key == "" {
		for _, e := range s.entries {
			switch e.phase {
			case phRemote:
				e.backoff = 0
				s.reclaim(e)
			case phClaiming:
				e.woken = true
			}
		}
		return
	}
	switch e := s.entries[key]; {
	case e == nil:
	case e.phase == phRemote:
		e.backoff = 0
		s.reclaim(e)
	case e.phase == phClaiming:
		e.woken = true
	}
}

func (s *Shard) onAbandon(r *Request) {
	e := s.entries[r.Key]
	switch r.where {
	case parked:
		s.dropWaiter(e, r)
		r.where = gone
		if e.phase == phRemote && len(e.waiters) == 0 {
			s.deleteEntry(e)
		}
	case candidate:
		r.where = gone
	case owning:
		// The caller left as it was granted the key and will not run.
		r.where = gone
		if e != nil && e.owner == r && e.phase == phRunning {
			s.timers.cancel(&e.timer)
			s.handOff(e, Reply{})
		}
	}
}

func (s *Shard) onForget(m *forget) {
	if s.closing {
		m.reply <- store.ErrClosed
		return
	}
	if e := s.entries[m.key]; e != nil {
		m.reply <- store.ErrInProgress
		return
	}
	if s.cache != nil {
		s.cache.Remove(m.key)
	}
	o := s.newOp(nil)
	o.fgt, o.Kind, o.Key = m, store.OpForget, m.key
	s.submit(o)
}

// remember keeps a terminal record in the LRU once it is validated: it must
// not have expired, and a stored error carries no value.
func (s *Shard) remember(key string, c *Cached) {
	rec := &c.Record
	if s.cache != nil && rec.ExpiresAt.After(s.now()) && (!rec.Failed || len(rec.Value) == 0) {
		s.cache.Add(key, c)
	}
}
