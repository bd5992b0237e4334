package store

import "context"

// Invalidator is implemented by stores that tell every instance sharing
// them what was deleted, so that no instance keeps replaying a forgotten
// result from its cache: the store's Forget publishes the key it deleted,
// and a caller that deleted a whole scope (a runtime's Clear, the CLI's
// clear) publishes its prefix with InvalidatePrefix.
//
// Delivery is at most once: a subscription that may have missed messages
// (a reconnect) delivers an Invalidation with Lost set, after which the
// subscriber must drop everything it holds. A store delivers invalidations
// to every subscriber, the instance that deleted included.
type Invalidator interface {
	// SubscribeInvalidations starts delivering invalidations to fn until
	// stop is called; stop waits until fn is no longer called. fn must
	// not block.
	SubscribeInvalidations(ctx context.Context, fn func(Invalidation)) (stop func(), err error)
	// InvalidatePrefix tells every subscriber that the keys starting with
	// prefix ("" for every key) were deleted.
	InvalidatePrefix(ctx context.Context, prefix string) error
}

// Invalidation is one message of an [Invalidator]: a key was forgotten, the
// keys of a prefix were cleared, or messages may have been lost.
type Invalidation struct {
	// Key is the key forgotten or, with Prefix, the prefix of the keys
	// cleared ("" for every key).
	Key    string
	Prefix bool
	// Lost reports that invalidations may have been lost (a reconnect):
	// drop every key.
	Lost bool
}

// Matches reports whether inv concerns key.
func (inv Invalidation) Matches(key string) bool {
	switch {
	case inv.Lost:
		return true
	case inv.Prefix:
		return len(key) >= len(inv.Key) && key[:len(inv.Key)] == inv.Key
	}
	return key == inv.Key
}
