package memstore

import (
	"container/heap"
	"fmt"
	"time"

	"github.com/idemrt/idem/store"
)

// expiryItem asks for key to be removed at at, if it still maps to rec.
type expiryItem struct {
	at  time.Time
	key string
	rec *record
}

// expiryHeap is a min-heap of removal times.
type expiryHeap []expiryItem

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryItem)) }
func (h *expiryHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = expiryItem{}
	*h = old[:len(old)-1]
	return it
}

func (h *expiryHeap) push(it expiryItem) { heap.Push(h, it) }
func (h *expiryHeap) pop() expiryItem    { return heap.Pop(h).(expiryItem) }

func invalidClaim(req store.ClaimRequest) error {
	switch {
	case req.Owner == "":
		return fmt.Errorf("%w: empty owner", store.ErrInvalidArgument)
	case req.Lease <= 0:
		return invalidLease(req.Lease)
	default:
		return invalidTTL(req.TTL)
	}
}

func invalidLease(d time.Duration) error {
	return fmt.Errorf("%w: lease %v must be positive", store.ErrInvalidArgument, d)
}

func invalidTTL(d time.Duration) error {
	return fmt.Errorf("%w: ttl %v must be positive", store.ErrInvalidArgument, d)
}
