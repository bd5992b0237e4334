package actors

import (
	"context"
	"errors"
	"time"

	"github.com/idemrt/idem/store"
)

// op is a store operation with what the shard needs to route its result.
type op struct {
	store.Op
	e      *entry
	forget *forget
	// sent is when the shard submitted the op. A lease granted or renewed
	// by it is counted from then: the store started it no earlier, so the
	// shard never believes in a lease the store has already ended.
	sent time.Time
}

// maxFree bounds the shard's free lists of ops and entries.
const maxFree = 256

// newOp returns a blank op for e (nil for a forget), from the free list.
func (s *Shard) newOp(e *entry) *op {
	var o *op
	if n := len(s.freeOps); n > 0 {
		o = s.freeOps[n-1]
		s.freeOps = s.freeOps[:n-1]
	} else {
		o = new(op)
	}
	o.e = e
	if e != nil {
		e.ops++
	}
	return o
}

func (s *Shard) freeOp(o *op) {
	if o.e != nil {
		o.e.ops--
	}
	*o = op{}
	if len(s.freeOps) < maxFree {
		s.freeOps = append(s.freeOps, o)
	}
}

// submit runs o on the store: inline for an in-process store, else through
// the group-commit batcher.
func (s *Shard) submit(o *op) {
	s.nOps.Add(1)
	o.sent = s.now()
	if s.inline {
		// An in-process store does not block: no timeout, no batch.
		s.nBatches.Add(1)
		store.RunOne(context.Background(), s.cfg.Store, &o.Op)
		s.handle(o)
		return
	}
	s.commit.Add(o)
}

func (s *Shard) storeContext() (context.Context, context.CancelFunc) {
	if s.cfg.StoreTimeout <= 0 {
		return context.Background(), func() {}
	}
	return context.WithTimeout(context.Background(), s.cfg.StoreTimeout)
}

// flush starts one batch on the shard's I/O worker; its results come back
// to the actor as a batchDone message.
func (s *Shard) flush(batch []*op) {
	s.nBatches.Add(1)
	ops := make([]*store.Op, len(batch))
	for i, o := range batch {
		ops[i] = &o.Op
	}
	storage, observe := s.cfg.Store, s.cfg.OnBatch
	s.io.Submit(func() {
		ctx, cancel := s.storeContext()
		start := time.Now()
		store.Run(ctx, storage, ops)
		took := time.Since(start)
		cancel()
		var ev BatchEvent
		if observe != nil {
			ev = BatchEvent{Shard: s.index, Ops: len(ops), Duration: took}
			for _, op := range ops {
				if op.Err != nil && !store.IsContract(op.Err) {
					ev.Failed++
				}
			}
		}
		s.send(&batchDone{ops: batch})
		if observe != nil {
			observe(ev) // after the results went back: the shard does not wait for it
		}
	})
}

func (s *Shard) onBatch(batch []*op) {
	for _, o := range batch {
		s.handle(o)
	}
	s.commit.Done(batch) // batch's memory is reused; its ops are freed by handle
	s.checkDrained()
}

// handle routes a finished operation to its entry, then frees it.
func (s *Shard) handle(o *op) {
	defer s.freeOp(o)
	if o.forget != nil {
		o.forget.reply <- o.Err
		return
	}
	e := o.e
	if s.entries[e.key] != e {
		return // the entry went away (shutdown) while the op was out
	}
	switch o.Kind {
	case store.OpClaim:
		s.claimed(e, o)
	case store.OpComplete:
		s.completed(e, o)
	case store.OpRelease:
		s.released(e, o)
	case store.OpRenew:
		s.renewed(e, o)
	}
}

// scheduleRenew arms the next renewal of e's lease a third of it after from.
func (s *Shard) scheduleRenew(e *entry, from time.Time) {
	e.timer.kind = timerRenew
	s.timers.schedule(&e.timer, from.Add(e.lease/3))
	s.rearm()
}

// DefaultPollInterval is the longest wait between two re-claims of a key
// held elsewhere when the store cannot wake waiters and Config.PollInterval
// is zero.
const DefaultPollInterval = 100 * time.Millisecond

// scheduleReclaim arms the fallback re-claim of a key held elsewhere: when
// the holder's lease ends, or sooner on a doubling backoff, in case its
// wake-up is lost.
//
// With a store that wakes waiters the timer is only a safety net and starts
// slower; without one it is the only way to learn of the settle: the first
// re-claim comes after 10ms (or PollInterval, if shorter), and the waits
// double up to PollInterval.
func (s *Shard) scheduleReclaim(e *entry) {
	most := s.cfg.PollInterval
	if most <= 0 {
		most = DefaultPollInterval
	}
	first := min(10*time.Millisecond, most)
	if s.cfg.wakerID != "" {
		first, most = 200*time.Millisecond, 2*time.Second
	}
	e.backoff = min(max(2*e.backoff, first), most)
	wait := min(e.backoff, e.left+time.Millisecond)
	e.timer.kind = timerReclaim
	s.timers.schedule(&e.timer, s.now().Add(wait))
	s.rearm()
}

func (s *Shard) onTimer(it *timerItem) {
	switch it.kind {
	case timerSettle:
		if e := it.e; s.entries[e.key] == e {
			s.settleDue(e)
		}
	case timerRenew:
		if e := it.e; e.phase == phRunning && !e.lost {
			o := s.newOp(e)
			o.Kind, o.Key, o.Token, o.Lease = store.OpRenew, e.key, e.token, e.lease
			s.submit(o)
		}
	case timerReclaim:
		if e := it.e; e.phase == phRemote {
			s.restart(e)
		}
	case timerLeaseEnd:
		if e := it.e; s.entries[e.key] == e && s.leaseEnded(e) {
			s.letGo(e)
		}
	case timerRetry:
		switch e := it.e; e.phase {
		case phFinishing:
			s.complete(e)
		case phReleasing:
			s.sendRelease(e)
		}
	}
}

func (s *Shard) renewed(e *entry, o *op) {
	if e.phase != phRunning || o.Token != e.token || e.lost || e.owner.NoRenew {
		// An answer for an earlier owner, or for a run already over: it
		// changes nothing (a hard lease stays hard).
		return
	}
	switch {
	case o.Err == nil:
		e.leaseAt = o.sent
		s.scheduleRenew(e, e.leaseAt)
	case errors.Is(o.Err, store.ErrLeaseLost):
		if e.owner.finishing.Load() {
			return // the owner completed the key itself meanwhile
		}
		e.lost = true
		s.cfg.Logger.Warn("idem: lease lost while the function runs; its result will be refused", "key", e.key)
		e.owner.stop(store.ErrLeaseLost)
	default:
		s.cfg.Logger.Warn("idem: renewing a lease failed; retrying", "key", e.key, "err", o.Err)
		if !s.now().Before(e.leaseAt.Add(e.lease)) {
			// The lease may have run out, and another instance may take the
			// key over: tell fn to stop. Its result is still offered to the
			// store, which refuses it if the key was taken over.
			e.owner.stop(store.ErrLeaseLost)
		}
		s.scheduleRenew(e, s.now())
	}
}
