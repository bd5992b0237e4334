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
// process nothing is ever lost: fn never receives Lost.
func (s *Store) SubscribeInvalidations(_ context.Context, fn func(store.Invalidation)) (func(), error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: memstore: SubscribeInvalidations with a nil fn", store.ErrInvalidArgument)
	}
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	id := s.subSeq.Add(1)
	s.subMu.Lock()
	if s.invals == nil {
		s.invals = make(map[uint64]func(store.Invalidation))
	}
	s.invals[id] = fn
	s.subMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.subMu.Lock()
			delete(s.invals, id)
			s.subMu.Unlock()
		})
	}, nil
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
	fns := make([]func(store.Invalidation), 0, len(s.invals))
	for _, fn := range s.invals {
		fns = append(fns, fn)
	}
	s.subMu.RUnlock()
	for _, fn := range fns {
		fn(inv)
	}
}
