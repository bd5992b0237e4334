package memstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/idemrt/idem/store"
)

var _ store.Invalidator = (*Store)(nil)

// SubscribeInvalidations implements [store.Invalidator]: fn is called, on
// the goroutine of the Forget or InvalidatePrefix, with every key a Forget
// of this Store deleted and every prefix given to InvalidatePrefix. In one
// process nothing is ever lost: fn never receives Lost. stop returns once
// fn is no longer called (a call under way when stop is called ends
// first), so fn must not call stop.
func (s *Store) SubscribeInvalidations(_ context.Context, fn func(store.Invalidation)) (func(), error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: memstore: SubscribeInvalidations with a nil fn", store.ErrInvalidArgument)
	}
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	sub := &invalSub{fn: fn}
	id := s.subSeq.Add(1)
	s.subMu.Lock()
	if s.invals == nil {
		s.invals = make(map[uint64]*invalSub)
	}
	s.invals[id] = sub
	s.subMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.subMu.Lock()
			delete(s.invals, id)
			s.subMu.Unlock()
			// A Forget may have taken sub from the map before the delete:
			// wait for its call, and keep any later one from running.
			sub.mu.Lock()
			sub.stopped = true
			sub.mu.Unlock()
		})
	}, nil
}

// invalSub is one invalidation subscription. mu is held while fn runs, so
// that stop can wait for it.
type invalSub struct {
	fn      func(store.Invalidation)
	mu      sync.Mutex
	stopped bool // under mu
}

// deliver calls fn with inv, unless the subscription stopped.
func (sub *invalSub) deliver(inv store.Invalidation) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if !sub.stopped {
		sub.fn(inv)
	}
}

// InvalidatePrefix implements [store.Invalidator].
func (s *Store) InvalidatePrefix(ctx context.Context, prefix string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.invalidate(store.Invalidation{Key: prefix, Prefix: true})
	return nil
}

// invalidate calls every invalidation subscriber with inv.
func (s *Store) invalidate(inv store.Invalidation) {
	s.subMu.RLock()
	if len(s.invals) == 0 {
		s.subMu.RUnlock()
		return
	}
	subs := make([]*invalSub, 0, len(s.invals))
	for _, sub := range s.invals {
		subs = append(subs, sub)
	}
	s.subMu.RUnlock()
	for _, sub := range subs {
		sub.deliver(inv)
	}
}
