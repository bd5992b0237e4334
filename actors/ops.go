package actors

import (
	"context"
	"time"

	"github.com/idemrt/idem/internal/handoff"
	"github.com/idemrt/idem/mailbox"
	"github.com/idemrt/idem/store"
)

// op is a store operation with what the shard needs to route its result.
type op struct {
	store.Op
	e      *keyState
	forget *forget
	// sent is when the shard submitted the op. A lease granted or renewed
	// by it is counted from then: the store started it no earlier, so the
	// shard never believes in a lease the store has already ended.
	sent time.Time
}

// maxFree bounds the shard's free lists of ops and key states.
const maxFree = 256

// maxSpareWaiters bounds the waiters slice a shard keeps for reuse: a
// storm's memory is not kept for good.
const maxSpareWaiters = 4096

// newOp returns a blank op for e (nil for a forget), from the free list.
func (s *shard) newOp(e *keyState) *op {
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

func (s *shard) freeOp(o *op) {
	if o.e != nil {
		o.e.ops--
	}
	*o = op{}
	if len(s.freeOps) < maxFree {
		s.freeOps = append(s.freeOps, o)
	}
}

// submitOp turns a step's store operation into an op and sends it.
func (s *shard) submitOp(e *keyState, oe *opEffect) {
	o := s.newOp(e)
	o.Kind, o.Key = oe.kind, e.key
	switch oe.kind {
	case store.OpClaim:
		o.Claim = store.ClaimRequest{
			Owner:       s.newOwner(),
			Lease:       oe.lease,
			TTL:         oe.ttl,
			Fingerprint: oe.fp,
			Waiter:      s.cfg.wakerID,
		}
		if oe.holder != "" && s.cfg.dead != nil && s.cfg.dead(oe.holder) {
			o.Claim.Dead = oe.holder
		}
	case store.OpComplete:
		o.Token, o.Record, o.TTL = oe.token, oe.record, oe.ttl
	case store.OpRelease:
		o.Token = oe.token
	case store.OpRenew:
		o.Token, o.Lease = oe.token, oe.lease
	}
	s.submit(o)
}

// submit runs o on the store: at once for an in-process store (its answer
// is handled once the current message is done, see drainInline), else
// through the group-commit batcher of o's partition.
func (s *shard) submit(o *op) {
	s.nOps.Add(1)
	o.sent = s.now()
	if s.inline {
		// An in-process store does not block: no timeout, no batch.
		s.nBatches.Add(1)
		store.RunOne(context.Background(), s.cfg.Store, &o.Op)
		s.inlineDone = append(s.inlineDone, o)
		return
	}
	s.partFor(o.Key).commit.Add(o)
}

// drainInline handles the answers of the in-process store's operations,
// each as its own event, until none is left: a step never runs inside
// another. Each answer leaves the queue before it is handled, so a panic
// recovered in one (a bug) costs that answer only, not the queue.
func (s *shard) drainInline() {
	for s.inlineHead < len(s.inlineDone) {
		o := s.inlineDone[s.inlineHead]
		s.inlineDone[s.inlineHead] = nil
		s.inlineHead++
		s.handle(o)
	}
	s.inlineDone, s.inlineHead = s.inlineDone[:0], 0
}

// partition is one store partition's share of a shard's I/O: its own
// group-commit batcher and worker, so that a slow partition delays only
// its own keys.
type partition struct {
	index  int
	commit *mailbox.Committer[*op]
	io     *mailbox.Worker
}

// partFor returns the partition of key (see store.Partitioner), created on
// first use.
func (s *shard) partFor(key string) *partition {
	i := 0
	if s.partitioner != nil {
		i = s.partitioner.Partition(key)
	}
	if p := s.parts[i]; p != nil {
		return p
	}
	p := &partition{index: i, io: mailbox.NewWorker()}
	p.commit = mailbox.NewCommitter(s.cfg.MaxBatch, func(batch []*op) { s.flush(p, batch) })
	if s.parts == nil {
		s.parts = make(map[int]*partition)
	}
	s.parts[i] = p
	return p
}

// inFlight reports whether any partition has a batch out.
func (s *shard) inFlight() bool {
	for _, p := range s.parts {
		if p.commit.InFlight() {
			return true
		}
	}
	return false
}

func (s *shard) storeContext() (context.Context, context.CancelFunc) {
	if s.cfg.StoreTimeout <= 0 {
		return context.Background(), func() {}
	}
	return context.WithTimeout(context.Background(), s.cfg.StoreTimeout)
}

// flush starts one batch of partition p on its I/O worker; its results come
// back to the actor as a batchDone message.
func (s *shard) flush(p *partition, batch []*op) {
	s.nBatches.Add(1)
	ops := make([]*store.Op, len(batch))
	for i, o := range batch {
		ops[i] = &o.Op
	}
	storage, observe := s.cfg.Store, s.cfg.OnBatch
	handoff.Note(handoff.Batch)
	p.io.Submit(func() {
		ctx, cancel := s.storeContext()
		start := time.Now()
		store.Run(ctx, storage, ops)
		took := time.Since(start)
		cancel()
		failed := 0
		if observe != nil {
			for _, op := range ops {
				if op.Err != nil && !store.IsContract(op.Err) {
					failed++
				}
			}
		}
		handoff.Note(handoff.BatchDone)
		s.send(&batchDone{part: p, ops: batch})
		if observe != nil {
			observe(s.index, len(ops), failed, took) // after the results went back: the shard does not wait for it
		}
	})
}

func (s *shard) onBatch(m *batchDone) {
	for _, o := range m.ops {
		s.handle(o)
	}
	m.part.commit.Done(m.ops) // the batch's memory is reused; its ops are freed by handle
	s.checkDrained()
}

// DefaultPollInterval is the longest wait between two re-claims of a key
// held elsewhere when the store cannot wake waiters and Config.PollInterval
// is zero.
const DefaultPollInterval = 100 * time.Millisecond
