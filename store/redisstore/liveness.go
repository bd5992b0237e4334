package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/idemrt/idem/store"
)

// Liveness records (store.Liveness) are plain strings with an expiry,
// <prefix>live{<instance>}, one per instance, outside any scope: instance
// ids are random across processes. Beat is a SET with PX, Live an EXISTS:
// the record lives by Redis's clock. On a cluster an instance's record is
// in a slot of its own, never the key's, so the claim script cannot read
// it: the runtime reads it first, and the claim names the holder it found
// dead (ARGV[6] of the claim script); the script takes the key over only
// if that owner still holds it.

var _ store.Liveness = (*Store)(nil)

// liveKey returns the Redis key of instance's liveness record.
func (s *Store) liveKey(instance string) string {
	return s.prefix + "live{" + instance + "}"
}

// Beat implements [store.Liveness].
func (s *Store) Beat(ctx context.Context, instance string, ttl time.Duration) error {
	if err := checkInstance(instance); err != nil {
		return err
	}
	if err := store.CheckDuration("liveness ttl", ttl); err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return s.c.Set(ctx, s.liveKey(instance), "1", time.Duration(ms(ttl))*time.Millisecond).Err()
}

// Live implements [store.Liveness].
func (s *Store) Live(ctx context.Context, instance string) (bool, error) {
	if err := checkInstance(instance); err != nil {
		return false, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	n, err := s.c.Exists(ctx, s.liveKey(instance)).Result()
	return n > 0, err
}

// bound applies the store's timeout when ctx has no deadline.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || s.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

func checkInstance(instance string) error {
	if instance == "" {
		return fmt.Errorf("%w: empty instance", store.ErrInvalidArgument)
	}
	return nil
}
