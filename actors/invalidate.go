package actors

// Invalidations from the store (store.Invalidator): another instance, or
// this one, forgot a key or cleared a scope, and every shard drops what
// its LRU holds of it.
//
// The race: a store read (a claim) sent before the delete may come back
// after the invalidation was handled, and would put the deleted result
// back into the LRU. An invalidation therefore also marks every entry of
// the keys it names (a key with a read out has one) as caching nothing:
// an entry created after the invalidation reads the store after the
// delete, and may cache what it finds.

import (
	"strings"

	"github.com/idemrt/idem/store"
)

// invalidate is an invalidation for one shard.
type invalidate struct{ inv store.Invalidation }

func (*invalidate) IgnoreDeadLetterLogging() {}

// onInvalidation routes an invalidation to the shard of its key, or to
// every shard for a prefix or a lost subscription. It is the store's
// callback: it never blocks.
func (set *Set) onInvalidation(inv store.Invalidation) {
	if !set.started.Load() {
		return // no shard yet: nothing is cached
	}
	select {
	case <-set.done:
		return
	default:
	}
	set.nInvalidations.Add(1)
	m := &invalidate{inv: inv}
	if !inv.Lost && !inv.Prefix {
		set.shardOf(inv.Key).send(m)
		return
	}
	for _, s := range set.shards {
		s.send(m)
	}
}

// onInvalidate drops from the LRU what inv names, and keeps every entry it
// names from caching what its store reads find.
func (s *shard) onInvalidate(inv store.Invalidation) {
	var dropped int64
	switch {
	case !inv.Lost && !inv.Prefix:
		defer s.keyDrop(inv.Key)()
		if e := s.entries[inv.Key]; e != nil {
			e.noCache = true
		}
		if s.cache != nil && s.cache.Remove(inv.Key) {
			dropped++
		}
	default:
		defer s.allDrop()()
		for k, e := range s.entries {
			if inv.Matches(k) {
				e.noCache = true
			}
		}
		if s.cache != nil {
			if inv.Lost || inv.Key == "" {
				dropped = int64(s.cache.Len())
				s.cache.Purge()
				break
			}
			for _, k := range s.cache.Keys() {
				if strings.HasPrefix(k, inv.Key) && s.cache.Remove(k) {
					dropped++
				}
			}
		}
	}
	s.nDrops.Add(dropped)
}
