package actors

// The callers parked on an entry: their settle times, and how they are
// answered when the key settles or cannot be waited for.

import "time"

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
	if !r.deadline.IsZero() || r.Settle <= 0 || r.Settle == forever {
		return
	}
	r.deadline = s.now().Add(r.Settle)
	if e.settleTimer.idx < 0 || r.deadline.Before(e.settleTimer.at) {
		s.timers.schedule(&e.settleTimer, r.deadline)
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
	if c := e.owner; c != nil && c.where == claiming && !c.deadline.IsZero() {
		if !now.Before(c.deadline) {
			s.reply(c, s.conflict(e))
			c.where = gone
		} else if next.IsZero() || c.deadline.Before(next) {
			next = c.deadline
		}
	}
	if !next.IsZero() {
		s.timers.schedule(&e.settleTimer, next)
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
	r.where = claiming
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

// answerWaiters gives every waiter of e the same answer. A settled result
// is each waiter's last: the shard is done with them.
func (s *Shard) answerWaiters(e *entry, rep Reply) {
	for _, w := range e.waiters {
		s.reply(w, rep)
		if rep.Kind == Settled {
			s.dropRequest(w)
		}
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
