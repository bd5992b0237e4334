package mailbox

// Pending returns how many operations wait for the next batch: the shard
// has no use for it, the tests check the Committer's queue with it.
func (c *Committer[T]) Pending() int { return len(c.pending) }
