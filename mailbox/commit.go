package mailbox

// Committer gathers operations into batches with at most one batch in flight
// (group commit). It is owned by one goroutine (a shard actor) and is not safe
// for concurrent use.
//
// The first operation to arrive when nothing is in flight is flushed at once,
// so a lone caller waits for no one. Operations that arrive while a batch is
// out queue up and go together as the next batch, so under load one round
// trip serves many keys.
type Committer[T any] struct {
	flush    func(batch []T)
	pending  []T
	spare    []T
	inflight bool
	max      int
}

// NewCommitter returns a Committer that hands batches of at most most
// operations to flush (0 means no limit). flush must start the batch and
// return; the owner calls [Committer.Done] when the batch's results have been
// handled.
func NewCommitter[T any](most int, flush func(batch []T)) *Committer[T] {
	return &Committer[T]{flush: flush, max: most}
}

// Add queues op, flushing at once if no batch is in flight.
func (c *Committer[T]) Add(op T) {
	c.pending = append(c.pending, op)
	if !c.inflight {
		c.next()
	}
}

// Done marks the in-flight batch as handled and flushes the next one, if any
// operations are waiting. batch is the slice given to flush; the Committer
// reuses its memory.
func (c *Committer[T]) Done(batch []T) {
	clear(batch)
	c.spare = batch[:0]
	c.inflight = false
	if len(c.pending) > 0 {
		c.next()
	}
}

func (c *Committer[T]) next() {
	batch := c.pending
	if c.max > 0 && len(batch) > c.max {
		rest := batch[c.max:]
		batch = batch[:c.max:c.max]
		c.pending = append(c.spare, rest...)
		clear(rest) // batch's array must hold nothing past its length once done
	} else {
		c.pending = c.spare
	}
	c.spare = nil
	c.inflight = true
	c.flush(batch)
}

// InFlight reports whether a batch is out.
func (c *Committer[T]) InFlight() bool { return c.inflight }
