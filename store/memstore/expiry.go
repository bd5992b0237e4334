package memstore

import "time"

// expiryItem asks for key to be removed at at, if it still maps to rec.
type expiryItem struct {
	at  tick
	key string
	rec *record
}

// expiryQueue is a FIFO of removal times. Items pushed with the same
// duration from a clock that does not go back arrive in time order, so the
// head is always the next one due.
//
// It is kept in blocks of queueBlock items, not one slice: a queue holds an
// item per record of its duration (every key of a day, with a day's TTL),
// and a slice that grows by doubling copies all of them each time, and
// leaves the old arrays to the collector; a block, once read, goes.
type expiryQueue struct {
	d time.Duration
	// blocks hold the items in order, from blocks[0][head]. Each has
	// queueBlock items of room; all but the last are full.
	blocks [][]expiryItem
	head   int
	n      int // items queued
	// headAt is the head's time, when there is a head: every operation
	// checks it (see sweep), and it is read here without touching the
	// block, which an operation on another key seldom has in cache.
	headAt tick
}

// queueBlock is how many items a block of a queue holds (8 KiB).
const queueBlock = 256

func (q *expiryQueue) len() int { return q.n }

func (q *expiryQueue) push(it expiryItem) {
	last := len(q.blocks) - 1
	if last < 0 || len(q.blocks[last]) == queueBlock {
		q.blocks = append(q.blocks, make([]expiryItem, 0, queueBlock))
		last++
	}
	q.blocks[last] = append(q.blocks[last], it)
	if q.n == 0 {
		q.headAt = it.at
	}
	q.n++
}

// front returns the head, if the queue has one.
func (q *expiryQueue) front() (expiryItem, bool) {
	if q.n == 0 {
		return expiryItem{}, false
	}
	return q.blocks[0][q.head], true
}

// popDue removes and returns the head if it is due at now.
func (q *expiryQueue) popDue(now tick) (expiryItem, bool) {
	if q.n == 0 || now < q.headAt {
		return expiryItem{}, false
	}
	it := q.blocks[0][q.head]
	q.drop()
	return it, true
}

// drop removes the head, of a queue that has one.
func (q *expiryQueue) drop() {
	b := q.blocks[0]
	b[q.head] = expiryItem{}
	q.head++
	q.n--
	if q.head == len(b) {
		// The first block is read: a lone block is used again from its
		// start, one with others after it goes.
		q.head = 0
		if len(q.blocks) == 1 {
			q.blocks[0] = b[:0]
		} else {
			q.blocks[0] = nil
			q.blocks = q.blocks[1:]
		}
	}
	if q.n > 0 {
		q.headAt = q.blocks[0][q.head].at
	}
}

// filter keeps, in order, the items for which keep reports true, and
// removes the others.
func (q *expiryQueue) filter(keep func(expiryItem) bool) {
	// Kept items move to the front, to position w: never past the item
	// being read.
	w := 0
	for bi, b := range q.blocks {
		from := 0
		if bi == 0 {
			from = q.head
		}
		for _, it := range b[from:] {
			if keep(it) {
				q.blocks[w/queueBlock][w%queueBlock] = it
				w++
			}
		}
	}
	nb := (w + queueBlock - 1) / queueBlock
	if nb > 0 {
		b := q.blocks[nb-1]
		n := w - (nb-1)*queueBlock
		clear(b[n:])
		q.blocks[nb-1] = b[:n]
	}
	clear(q.blocks[nb:])
	q.blocks = q.blocks[:nb]
	q.head, q.n = 0, w
	if w > 0 {
		q.headAt = q.blocks[0][0].at
	}
}

// maxQueues bounds the distinct durations with a queue of their own; the
// rest share the last queue, whose items may then be out of order. That only
// delays the removal of records no operation touches (an expired record is
// never returned: live checks every record it reads).
const maxQueues = 8

// expiryQueues holds one queue per distinct duration.
type expiryQueues []*expiryQueue

func (qs *expiryQueues) queue(d time.Duration) *expiryQueue {
	for _, q := range *qs {
		if q.d == d {
			return q
		}
	}
	if len(*qs) == maxQueues {
		return (*qs)[maxQueues-1]
	}
	q := &expiryQueue{d: d}
	*qs = append(*qs, q)
	return q
}
