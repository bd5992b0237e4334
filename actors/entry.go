package actors

// The shard's state for one key: the entry, its phases, and the messages
// that reach it from callers (a request, a caller leaving, a Forget).

import (
	"bytes"
	"time"

	"github.com/idemrt/idem/store"
)

type phase uint8

const (
	phClaiming  phase = iota + 1 // a Claim is out for entry.owner (the candidate)
	phRunning                    // entry.owner runs its function
	phFinishing                  // the owner's Complete is out (or waits to be retried)
	phReleasing                  // the owner's Release is out
	phRemote                     // another instance holds the key
)

// entry is the shard's state for one key with callers in flight.
type entry struct {
	key         string
	phase       phase
	owner       *Request // candidate while claiming, owner after a Grant
	token       store.Token
	fp          []byte // the holder's fingerprint, when known
	lease       time.Duration
	ttl         time.Duration
	leaseAt     time.Time // when the holder's lease was last granted or renewed
	left        time.Duration
	waiters     []*Request
	timer       timerItem // renewal (running), retry (finishing) or re-claim (remote)
	settleTimer timerItem // the earliest deadline of the waiters (and candidate)
	backoff     time.Duration
	lost        bool
	waited      bool // the key was seen in progress elsewhere: its callers joined a run
	woken       bool // a store wake-up came while a claim was out
	// askedAgain: a claim came back with a record that had ended meanwhile
	// and was sent again (once: a store whose records all seem ended, by a
	// clock ahead of ours, is not asked for ever).
	askedAgain bool
	// noCache: the entry was created while a Clear deletes its key (see
	// ClearPage): what it finds or stores may be what the Clear deletes,
	// so it is not cached.
	noCache    bool
	fin        *Finish
	ownerReply Reply // the owner's answer once a release is done
	ops        int   // store operations of the entry in flight
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
	e.noCache = s.clearing[key] > 0
	e.timer = timerItem{idx: -1, e: e}
	e.settleTimer = timerItem{idx: -1, kind: timerSettle, e: e}
	s.entries[key] = e
	s.nEntries.Add(1)
	return e
}

func (s *Shard) deleteEntry(e *entry) {
	if s.entries[e.key] != e {
		return
	}
	s.timers.cancel(&e.timer)
	s.timers.cancel(&e.settleTimer)
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
		s.dropRequest(r)
		return
	}
	e := s.entries[r.Key]
	if e == nil {
		e = s.newEntry(r.Key)
		e.owner, r.where = r, claiming
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

func (s *Shard) onAbandon(r *Request) {
	e := s.entries[r.Key]
	switch r.where {
	case parked:
		s.dropWaiter(e, r)
		r.where = gone
		if e.phase == phRemote && len(e.waiters) == 0 {
			s.deleteEntry(e)
		}
	case claiming:
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
	o.forget, o.Kind, o.Key = m, store.OpForget, m.key
	s.submit(o)
}

// remember keeps e's terminal record in the LRU once it is validated: it
// must not have expired, and a stored error carries no value. An entry
// created while a Clear deletes its key keeps nothing (see ClearPage).
func (s *Shard) remember(e *entry, c *Cached) {
	rec := &c.Record
	if s.cache != nil && !e.noCache && rec.ExpiresAt.After(s.now()) && (!rec.Failed || len(rec.Value) == 0) {
		s.cache.Add(e.key, *c)
	}
}
