package memstore

import (
	"context"
	"time"

	"github.com/idemrt/idem/store"
)

var (
	_ store.Inspector = (*Store)(nil)
	_ store.Scanner   = (*Store)(nil)
)

// Inspect implements [store.Inspector]. A claim in progress whose lease has
// ended is Held with no lease left until another claim takes it over (see
// the package doc).
func (s *Store) Inspect(ctx context.Context, key string) (store.Entry, error) {
	if err := s.check(ctx, key); err != nil {
		return store.Entry{}, err
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	wall := s.clock.Now()
	now := s.tickOf(wall)
	r := sh.live(key, now)
	switch {
	case r == nil:
		return store.Entry{State: store.Absent}, nil
	case r.state == completed:
		return store.Entry{State: store.Done, Token: r.token, Record: r.result(wall, now)}, nil
	}
	e := store.Entry{State: store.Held, Token: r.token, Fingerprint: r.fp}
	if left := time.Duration(r.leaseUntil - now); left > 0 {
		e.LeaseLeft = left
	}
	return e, nil
}
