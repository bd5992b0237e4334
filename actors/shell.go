package actors

// The shell around the transition function: the shard's messages become
// events for the key they concern, and the effects of each step are
// performed here, in a fixed order (timers, stops, cache, answers, dropped
// requests, warnings, store operations, forgetting the key).

import (
	"time"

	"github.com/idemrt/idem/internal/handoff"
	"github.com/idemrt/idem/store"
)

func (s *shard) newEntry(key string) *keyState {
	var e *keyState
	if n := len(s.freeEntries); n > 0 {
		e = s.freeEntries[n-1]
		s.freeEntries = s.freeEntries[:n-1]
	} else {
		e = new(keyState)
	}
	e.key = key
	if e.waiters == nil && s.spareWaiters != nil {
		e.waiters, s.spareWaiters = s.spareWaiters, nil
	}
	e.noCache = s.clearing[key] > 0
	e.timer = timerItem{idx: -1, e: e}
	e.settleTimer = timerItem{idx: -1, kind: timerSettle, e: e}
	s.entries[key] = e
	s.nEntries.Add(1)
	return e
}

func (s *shard) deleteEntry(e *keyState) {
	if s.entries[e.key] != e {
		return
	}
	s.timers.cancel(&e.timer)
	s.timers.cancel(&e.settleTimer)
	delete(s.entries, e.key)
	s.nEntries.Add(-1)
	// Reuse the state, unless an operation still refers to it (its result
	// will find the key gone and be dropped).
	if e.ops == 0 && len(s.freeEntries) < maxFree {
		waiters := e.waiters[:0]
		*e = keyState{waiters: waiters}
		s.freeEntries = append(s.freeEntries, e)
	}
	s.checkDrained()
}

// step moves e by ev and performs the effects.
// ev.now, when left zero, is read from the clock.
func (s *shard) step(e *keyState, ev event) {
	if ev.now.IsZero() {
		ev.now = s.now()
	}
	ev.closing = s.closing
	fx := &s.fx
	fx.reset()
	e.step(&s.stepCfg, ev, fx)
	s.perform(e, fx)
}

// perform does what a step asked for. e is nil for a Finish that found no
// key (only answers and dropped requests then).
//
// The cache is filled before any answer goes out, so that a caller that
// calls again finds the result there.
//
// The counters Stats reads (parked callers, keys in flight) are updated,
// and a forgotten key deleted, before any answer goes out: a caller that
// has its answer never sees itself counted.
func (s *shard) perform(e *keyState, fx *effects) {
	var key string
	if e != nil {
		key = e.key
	}
	for _, st := range fx.stops {
		st.req.stop(st.cause)
	}
	if fx.cache != nil && s.cache != nil {
		s.cacheAdd(key, *fx.cache)
	}
	if fx.waiters != 0 {
		s.nWaiters.Add(int64(fx.waiters))
	}
	if fx.done {
		if len(fx.ops) > 0 {
			panic("actors: a step forgot a key and sent it a store operation")
		}
		s.deleteEntry(e) // e may be reused from here on
		e = nil
	}
	for i := range fx.answers {
		a := &fx.answers[i]
		handoff.Note(handoff.Reply)
		select {
		case a.req.Reply <- a.rep:
		default:
			s.cfg.Logger.Error("idem: reply channel full", "key", a.req.Key)
		}
	}
	for _, r := range fx.drops {
		r.unref()
	}
	for i := range fx.broadcasts {
		b := &fx.broadcasts[i]
		settled := b.rep.Kind == Settled
		for _, r := range b.reqs {
			handoff.Note(handoff.Reply)
			select {
			case r.Reply <- b.rep:
			default:
				s.cfg.Logger.Error("idem: reply channel full", "key", r.Key)
			}
			if settled {
				r.unref()
			}
		}
		if cap(b.reqs) <= maxSpareWaiters {
			clear(b.reqs)
			s.spareWaiters = b.reqs[:0]
		}
	}
	// Timers after the answers: arming one costs a clock timer's reset,
	// which an answered caller need not wait for. (A forgotten key's timers
	// went with it.)
	if e != nil && len(fx.timers) > 0 {
		for _, t := range fx.timers {
			it := &e.timer
			if t.settle {
				it = &e.settleTimer
			}
			if t.at.IsZero() {
				s.timers.cancel(it)
				continue
			}
			it.kind = t.kind
			s.timers.schedule(it, t.at)
		}
		s.rearm()
	}
	for _, w := range fx.warns {
		if w.store {
			s.warnStore(w.op, key, w.err)
		} else if w.err != nil {
			s.cfg.Logger.Warn(w.msg, "key", key, "err", w.err)
		} else {
			s.cfg.Logger.Warn(w.msg, "key", key)
		}
	}
	for i := range fx.ops {
		s.submitOp(e, &fx.ops[i])
	}
}

// reply answers r outside a step (a closing shard, an LRU hit).
func (s *shard) reply(r *Request, rep Reply) {
	fx := &s.fx
	fx.reset()
	answerTo(fx, r, rep)
	s.perform(nil, fx)
}

func (s *shard) onRequest(r *Request) {
	if r.pre {
		// The shard has it now (see direct.go). It stays listed until its
		// run is over (onFinish), so that Clear and Forget see its key
		// busy however the shard heard of it, and its busy slot keeps a
		// storm's later callers from trying the store first.
		s.pending.Add(-1)
	} else if s.closing {
		s.reply(r, Reply{Kind: FailClosed})
		return
	}
	// The caller looked in the LRU before sending, but the key may have
	// completed since (its owner's Finish came first in this mailbox). Not
	// for an owner that claimed the key itself: the store granted it the
	// key, so what the LRU may hold of it is stale.
	now := s.now()
	if c, ok := s.hitUnless(r.pre, r.Key, now); ok {
		// The record goes in the request's own room (unused by a caller
		// that is no owner): the caller reads it before it releases the
		// request.
		r.Finish.Own = c
		s.reply(r, Reply{Kind: Settled, Result: &r.Finish.Own})
		return
	}
	e := s.entries[r.Key]
	if e == nil && s.direct && !r.pre {
		// A direct owner of the key runs: adopt it first, and park the
		// caller behind it (direct.go).
		if o := s.takeDirect(r.Key); o != nil {
			s.onRequest(o)
			e = s.entries[r.Key]
		}
	}
	if e == nil {
		e = s.newEntry(r.Key)
	}
	if r.pre && s.droppedSince(r) {
		// A drop of the key's LRU (a Forget or an invalidation from
		// another instance, a Clear) since its claim, which found no entry
		// to mark: its result may be deleted already, so nothing of this
		// run is cached (as for an entry the drop marks, see
		// keyState.noCache).
		e.noCache = true
	}
	s.step(e, event{kind: evArrive, req: r, now: now})
	if r.pre && r.where != owning {
		s.unlink(r) // not adopted (refused or stopped): no Finish to wait for
	}
}

func (s *shard) onAbandon(r *Request) {
	if r.pre {
		s.unlink(r) // its caller left: it will not run
	}
	e := s.entries[r.Key]
	if e == nil {
		if r.where != nowhere {
			r.where = gone
		}
		return
	}
	s.step(e, event{kind: evLeave, req: r})
}

func (s *shard) onQuiet(r *Request) {
	if e := s.entries[r.Key]; e != nil {
		s.step(e, event{kind: evQuiet, req: r})
	}
}

func (s *shard) onFinish(f *Finish) {
	if f.Req.pre {
		s.unlink(f.Req) // its run is over (see onRequest)
	}
	e := s.entries[f.Req.Key]
	if e == nil {
		fx := &s.fx
		fx.reset()
		staleFinish(f, fx)
		s.perform(nil, fx)
		return
	}
	s.step(e, event{kind: evFinish, fin: f})
}

// handle routes a finished store operation to its key, then frees it.
func (s *shard) handle(o *op) {
	defer s.freeOp(o)
	if o.forget != nil {
		o.forget.reply <- o.Err
		return
	}
	e := o.e
	if s.entries[e.key] != e {
		return // the key's state went away (shutdown) while the op was out
	}
	// The op no longer holds the key's state: if this answer settles the
	// key, its state is reused at once (the op itself stays readable until
	// the step is done, and is freed after).
	e.ops--
	o.e = nil
	ev := event{op: &o.Op, sent: o.sent}
	switch o.Kind {
	case store.OpClaim:
		ev.kind = evClaimed
		if o.Claim.Dead != "" && o.Err == nil && o.Result.Status == store.Claimed && o.Result.Takeover {
			s.nEarly.Add(1)
		}
		if s.direct && o.Err == nil && o.Result.Status == store.Claimed && o.Result.Takeover {
			s.announceOwnersOf(o.Key)
		}
		if s.direct && o.Err == nil && o.Result.Status != store.Claimed {
			s.heldByDirect(&o.Op)
			if o.Result.Status == store.Completed {
				if hit, ok := s.hit(o.Key, s.now()); ok {
					ev.own = &hit
				}
			}
		}
	case store.OpComplete:
		ev.kind = evCompleted
	case store.OpRelease:
		ev.kind = evReleased
	case store.OpRenew:
		ev.kind = evRenewed
	default:
		return
	}
	s.step(e, ev)
}

func (s *shard) onTimer(it *timerItem) {
	e := it.e
	if s.entries[e.key] != e {
		return
	}
	if it.kind == timerSettle {
		s.step(e, event{kind: evSettle})
		return
	}
	s.step(e, event{kind: evTimer, timer: it.kind})
}

// onWake handles a store wake-up for key, or for every key ("": wake-ups
// may have been lost).
func (s *shard) onWake(key string) {
	if key != "" {
		if e := s.entries[key]; e != nil {
			s.step(e, event{kind: evWake})
		}
		return
	}
	for _, e := range s.entries {
		s.step(e, event{kind: evWake})
	}
}

func (s *shard) onClosing() {
	s.closing = true
	for _, e := range s.entries {
		s.step(e, event{kind: evClose})
	}
	s.checkDrained()
}

func (s *shard) onStopping() {
	if s.armed != nil {
		s.armed.Stop()
		s.armed = nil
	}
	for _, e := range s.entries {
		s.step(e, event{kind: evStop})
	}
}

func (s *shard) onForget(m *forget) {
	if s.closing {
		m.reply <- store.ErrClosed
		return
	}
	if s.entries[m.key] != nil || s.hasDirect(m.key) {
		m.reply <- store.ErrInProgress
		return
	}
	// A direct owner's LRU insert is kept only if no drop was under way
	// since its claim (see shard.cacheDirect); an in-process store's
	// Forget is done when submit returns.
	defer s.keyDrop(m.key)()
	if s.cache != nil {
		s.cache.Remove(m.key)
	}
	o := s.newOp(nil)
	o.forget, o.Kind, o.Key = m, store.OpForget, m.key
	s.submit(o)
}

// leaseLeft is what is left of the lease of e's holder, as the shard sees
// it now.
func (s *shard) leaseLeft(e *keyState) time.Duration {
	m := mover{k: e, now: s.now()}
	return m.leaseLeft()
}
