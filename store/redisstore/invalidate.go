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
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

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
	ps, err := s.subscribeInval(ctx)
	if err != nil {
		return nil, err
	}
	sub := &subscription{s: s, ps: ps, done: make(chan struct{}), quit: make(chan struct{})}
	go s.receiveInval(sub, fn)
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	return sub.stop, nil
}

// The check of an idle invalidation subscription: after invalIdle without
// a message it sends a PING, and a connection that answers nothing within
// invalPong is taken for dead. go-redis's own check of a subscription
// (its Channel's) only writes its PING, and never finds a connection that
// swallows what it is sent (a flow a NAT dropped, a vanished peer): the
// invalidations published meanwhile would be lost without a word.
const (
	invalIdle = 3 * time.Second
	invalPong = 5 * time.Second
)

// subscribeInval subscribes to the invalidation channel on a connection
// of its own, and returns once Redis confirmed it.
func (s *Store) subscribeInval(ctx context.Context) (*redis.PubSub, error) {
	ps := s.c.Subscribe(ctx, s.invalChannel())
	if _, err := ps.Receive(ctx); err != nil {
		ps.Close()
		return nil, fmt.Errorf("redisstore: subscribe to invalidations: %w", err)
	}
	return ps, nil
}

// receiveInval reads sub's messages and hands them to fn until sub is
// stopped. A connection that fails is made again by go-redis, whose
// resubscription reports Lost; one that answers no PING is replaced by a
// new subscription, and Lost is reported once that one is confirmed.
func (s *Store) receiveInval(sub *subscription, fn func(store.Invalidation)) {
	defer close(sub.done)
	ctx := context.Background()
	ps := sub.current()
	var pinged time.Time // when a PING went out unanswered (zero: none)
	for {
		m, err := ps.ReceiveTimeout(ctx, invalIdle)
		if sub.stopping() {
			return
		}
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				// The connection failed: go-redis connects again on the
				// next Receive, and resubscribes (reported below).
				select {
				case <-sub.quit:
					return
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			switch {
			case pinged.IsZero():
				pctx, cancel := context.WithTimeout(ctx, invalPong)
				if ps.Ping(pctx) == nil {
					pinged = time.Now()
				}
				cancel()
			case time.Since(pinged) >= invalPong:
				sctx, cancel := context.WithTimeout(ctx, invalPong)
				fresh, err := s.subscribeInval(sctx)
				cancel()
				if err != nil {
					continue // tried again after the next idle wait
				}
				if !sub.replace(fresh) {
					return
				}
				ps.Close()
				ps, pinged = fresh, time.Time{}
				fn(store.Invalidation{Lost: true}) // what the dead one missed
			}
			continue
		}
		pinged = time.Time{}
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
