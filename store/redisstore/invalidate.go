package redisstore

// Invalidations (store.Invalidator) on the pub/sub machinery of the
// wake-ups: the forget script PUBLISHes the key it deleted, in the same
// step as the delete, to one channel every instance subscribes to
// (KeyPrefix + "inval"); InvalidatePrefix PUBLISHes a cleared scope there.
//
// On a cluster this is plain PUBLISH, not sharded pub/sub (SPUBLISH), as
// for the wake-ups: an invalidation is for every instance, on one channel,
// and a script may SPUBLISH only to a channel of its own key's slot, so
// sharded pub/sub would need one channel per slot, each subscribed on its
// master (and again after every failover). Plain PUBLISH reaches the
// subscribers connected to any node through the cluster bus; Forgets are
// rare (an operator's action), so the bus traffic is small.

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/store"
)

var _ store.Invalidator = (*Store)(nil)

// The first byte of an invalidation message: a key, or a prefix. The rest
// is the stored key (Options.Scope applied), or the stored prefix.
const (
	invalKey    = "k"
	invalPrefix = "p"
)

// invalChannel is the channel of the store's invalidations.
func (s *Store) invalChannel() string { return s.prefix + "inval" }

// SubscribeInvalidations implements [store.Invalidator]: fn receives each
// key a Forget of any store on the same Redis and KeyPrefix deleted (the
// forget script publishes it), each prefix given to InvalidatePrefix, and
// Lost after every resubscription (messages published while the
// connection was down are lost). A message about keys out of this store's
// Options.Scope is not delivered; one about a prefix of the scope is
// delivered as a prefix of every key. It returns once Redis confirmed the
// subscription.
func (s *Store) SubscribeInvalidations(ctx context.Context, fn func(store.Invalidation)) (func(), error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: redisstore: SubscribeInvalidations with a nil fn", store.ErrInvalidArgument)
	}
	ps := s.c.Subscribe(ctx, s.invalChannel())
	if _, err := ps.Receive(ctx); err != nil {
		ps.Close()
		return nil, fmt.Errorf("redisstore: subscribe to invalidations: %w", err)
	}
	sub := &subscription{ps: ps, done: make(chan struct{})}
	ch := ps.ChannelWithSubscriptions()
	go func() {
		defer close(sub.done)
		for m := range ch {
			switch m := m.(type) {
			case *redis.Message:
				if inv, ok := s.parseInvalidation(m.Payload); ok {
					fn(inv)
				}
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					// Resubscribed after a reconnect: what was published
					// meanwhile is lost.
					fn(store.Invalidation{Lost: true})
				}
			}
		}
	}()
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	return sub.stop, nil
}

// InvalidatePrefix implements [store.Invalidator]: one PUBLISH.
func (s *Store) InvalidatePrefix(ctx context.Context, prefix string) error {
	if s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	if err := s.c.Publish(ctx, s.invalChannel(), invalPrefix+s.scope+prefix).Err(); err != nil {
		return fmt.Errorf("redisstore: publish invalidation: %w", err)
	}
	return nil
}

// parseInvalidation reads a message of the invalidation channel, as this
// store's keys: ok is false for a message about no key of its scope, or
// one it cannot read.
func (s *Store) parseInvalidation(msg string) (store.Invalidation, bool) {
	kind, full := msg[:min(1, len(msg))], msg[min(1, len(msg)):]
	switch kind {
	case invalKey:
		if key, ok := strings.CutPrefix(full, s.scope); ok {
			return store.Invalidation{Key: key}, true
		}
	case invalPrefix:
		if p, ok := strings.CutPrefix(full, s.scope); ok {
			return store.Invalidation{Key: p, Prefix: true}, true
		}
		if strings.HasPrefix(s.scope, full) {
			return store.Invalidation{Prefix: true}, true // wider than the scope
		}
	}
	return store.Invalidation{}, false
}
