package actors

import (
	"sync"
	"sync/atomic"
)

// Requests from NewRequest are reused, with their reply channel, once both
// of their holders are done with them: the caller (Release) and the shard
// (done). A request is never reused while anything may still read or write
// it, so each holder gives it up only where that is sure:
//
//   - the caller, once it has its final reply and never told the shard it
//     left (an Abandon still to be read keeps the request alive);
//   - the shard, once it gave the request its final reply on the paths
//     where nothing refers to it any more: a settled result (from the LRU,
//     a claim that found one, or a Complete, for the owner and every
//     waiter), and the Finish of an owner that completed the key itself.
//
// Every other path keeps the shard's hold, and the request goes to the
// garbage collector as before: rare paths cost an allocation, never a
// stale reply.
type pooled struct {
	refs atomic.Int32 // holders left: 2 from NewRequest, 0 for a request built by hand
}

var requests = sync.Pool{New: func() any { return &Request{Reply: make(chan Reply, 1)} }}

// NewRequest returns a blank Request with a reply channel, from a pool.
// Its caller fills the exported fields (except Reply), and calls Release
// once it has read its final reply, unless it stopped waiting first.
func NewRequest() *Request {
	r := requests.Get().(*Request)
	r.pool.refs.Store(2)
	return r
}

// Release gives up the caller's hold on a request from NewRequest: it has
// read its final reply and will not touch r again. It does nothing for a
// request built by hand.
func (r *Request) Release() { r.unref() }

// dropRequest gives up the shard's hold on r (see pooled).
func (s *shard) dropRequest(r *Request) { r.unref() }

func (r *Request) unref() {
	if r.pool.refs.Load() == 0 || r.pool.refs.Add(-1) != 0 {
		return
	}
	ch := r.Reply
	select {
	case <-ch: // never expected: both holders saw every reply
	default:
	}
	*r = Request{Reply: ch}
	requests.Put(r)
}
