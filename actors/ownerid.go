package actors

import (
	"strconv"
	"sync/atomic"
)

// ownerIDs hands out claim owners, instance + "-" + a sequence number in
// base 36, unique across processes. They are made ownerBatch at a time in
// one string and handed out as its substrings: one allocation per batch
// rather than one per claim. (A batch's string lives as long as any of its
// owners does, in a record; they are small and expire alike.) Each shard
// has its own, used by its goroutine alone, so a claim takes no lock; the
// shards of a set share seq.
type ownerIDs struct {
	instance string
	seq      *atomic.Uint64

	block string
	ends  [ownerBatch]int
	next  int
}

const ownerBatch = 64

func (o *ownerIDs) get() string {
	if o.next == 0 || o.next == ownerBatch {
		o.refill()
	}
	start := 0
	if o.next > 0 {
		start = o.ends[o.next-1]
	}
	id := o.block[start:o.ends[o.next]]
	o.next++
	return id
}

func (o *ownerIDs) refill() {
	first := o.seq.Add(ownerBatch) - ownerBatch + 1
	b := make([]byte, 0, ownerBatch*(len(o.instance)+8))
	for i := range ownerBatch {
		b = append(b, o.instance...)
		b = append(b, '-')
		b = strconv.AppendUint(b, first+uint64(i), 36)
		o.ends[i] = len(b)
	}
	o.block = string(b)
	o.next = 0
}
