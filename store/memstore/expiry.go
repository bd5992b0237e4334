package memstore

import "time"

// expiryItem asks for key to be removed at at, if it still maps to rec.
type expiryItem struct {
	at  int64 // Unix nanoseconds
	key string
	rec *record
}

// expiryQueue is a FIFO of removal times. Items pushed with the same
// duration from a clock that does not go back arrive in time order, so the
// head is always the next one due.
type expiryQueue struct {
	d     time.Duration
	items []expiryItem
	head  int
}

func (q *expiryQueue) push(it expiryItem) { q.items = append(q.items, it) }

// popDue removes and returns the head if it is due at now.
func (q *expiryQueue) popDue(now time.Time) (expiryItem, bool) {
	if q.head == len(q.items) || now.UnixNano() < q.items[q.head].at {
		return expiryItem{}, false
	}
	it := q.items[q.head]
	q.drop()
	return it, true
}

// drop removes the head.
func (q *expiryQueue) drop() {
	q.items[q.head] = expiryItem{}
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if q.head > 1024 && q.head > len(q.items)/2 {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
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
