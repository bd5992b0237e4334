package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/idemrt/idem/store"
)

// Beat implements [store.Liveness]: instance is live until now + ttl by the
// store's clock. Ended records are dropped on the next Beat of any
// instance, so the map holds only instances that beat within their ttl.
func (s *Store) Beat(ctx context.Context, instance string, ttl time.Duration) error {
	if err := s.checkLive(ctx, instance); err != nil {
		return err
	}
	if err := store.CheckDuration("liveness ttl", ttl); err != nil {
		return err
	}
	now := s.clock.Now()
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if s.live == nil {
		s.live = make(map[string]time.Time)
	}
	for id, end := range s.live {
		if !now.Before(end) {
			delete(s.live, id)
		}
	}
	s.live[instance] = now.Add(ttl)
	return nil
}

// Live implements [store.Liveness].
func (s *Store) Live(ctx context.Context, instance string) (bool, error) {
	if err := s.checkLive(ctx, instance); err != nil {
		return false, err
	}
	now := s.clock.Now()
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	end, ok := s.live[instance]
	return ok && now.Before(end), nil
}

func (s *Store) checkLive(ctx context.Context, instance string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return store.ErrClosed
	}
	if instance == "" {
		return fmt.Errorf("%w: empty instance", store.ErrInvalidArgument)
	}
	return nil
}
