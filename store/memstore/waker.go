package memstore

import (
	"context"
	"strconv"
	"sync"

	"github.com/idemrt/idem/store"
)

// Subscribe implements [store.Waker]: fn is called with each key that settles
// while an instance registered under the returned id waits on it.
func (s *Store) Subscribe(_ context.Context, fn func(key string)) (string, func(), error) {
	if s.closed.Load() {
		return "", nil, store.ErrClosed
	}
	id := "mem-" + strconv.FormatUint(s.subSeq.Add(1), 10)
	s.subMu.Lock()
	s.subs[id] = fn
	s.subMu.Unlock()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			s.subMu.Lock()
			delete(s.subs, id)
			s.subMu.Unlock()
		})
	}
	return id, stop, nil
}

func (s *Store) notify(key string, waiters []string) {
	if len(waiters) == 0 {
		return
	}
	s.subMu.RLock()
	fns := make([]func(string), 0, len(waiters))
	for _, w := range waiters {
		if fn := s.subs[w]; fn != nil {
			fns = append(fns, fn)
		}
	}
	s.subMu.RUnlock()
	for _, fn := range fns {
		fn(key)
	}
}
