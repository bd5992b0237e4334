package actors

import (
	"container/heap"
	"time"
)

type timerKind uint8

const (
	timerSettle   timerKind = iota + 1 // the earliest settle time of an entry's callers ends
	timerRenew                         // renew the owner's lease
	timerReclaim                       // re-claim a key held elsewhere
	timerRetry                         // repeat a Complete or Release the store failed
	timerLeaseEnd                      // an owner's unrenewed lease ends
)

// timerItem is one deadline in a shard's timer heap. Entries embed two: one
// for the earliest settle time of their waiting callers (one heap item per
// key, not per caller, so that a storm of a thousand callers costs the heap
// nothing), one for renewal, re-claim or retry.
type timerItem struct {
	at   time.Time
	kind timerKind
	idx  int // position in the heap, -1 when not in it
	e    *keyState
}

// timerHeap is a min-heap of deadlines with removal by index. One clock
// timer per shard is armed for its earliest item.
type timerHeap []*timerItem

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}
func (h *timerHeap) Push(x any) {
	it := x.(*timerItem)
	it.idx = len(*h)
	*h = append(*h, it)
}
func (h *timerHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	it.idx = -1
	return it
}

// schedule puts it in the heap at at, or moves it there.
func (h *timerHeap) schedule(it *timerItem, at time.Time) {
	it.at = at
	if it.idx >= 0 && it.idx < len(*h) && (*h)[it.idx] == it {
		heap.Fix(h, it.idx)
		return
	}
	heap.Push(h, it)
}

// cancel takes it out of the heap if it is there.
func (h *timerHeap) cancel(it *timerItem) {
	if it.idx >= 0 && it.idx < len(*h) && (*h)[it.idx] == it {
		heap.Remove(h, it.idx)
	}
	it.idx = -1
}

// popDue removes and returns the earliest item if it is due at now.
func (h *timerHeap) popDue(now time.Time) *timerItem {
	if len(*h) == 0 || (*h)[0].at.After(now) {
		return nil
	}
	return heap.Pop(h).(*timerItem)
}
