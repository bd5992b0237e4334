package actors

// Clearing keys through their shards: a runtime's Clear asks each shard
// which of a page's keys it may delete, so that no result the store
// deletes comes back into a shard's LRU; and a shard drops from its LRU
// every key of a scope.

import (
	"context"
	"strings"

	"github.com/idemrt/idem/store"
)

// Clear runs one page of a runtime's Clear over the shards of its keys: it
// asks them which keys may be deleted, calls del with the answer (busy[i]
// for keys[i] in flight on its shard; del deletes the others from the
// store), then tells the shards the deletes are over. It returns
// store.ErrClosed when a shard is closing, or ctx's error when ctx ends
// before every shard answered; del is not called then.
//
// A shard allows a key that has no entry (no caller in flight on it): it
// drops the key from its LRU at once and, until End, caches nothing for it,
// so that a call of the key that reads the record before the store deletes
// it does not bring the deleted result back into the LRU. A key with an
// entry is busy: its run goes on, and its result is kept.
func (set *Set) Clear(ctx context.Context, keys []string, del func(busy []bool)) error {
	page := set.beginClear(keys)
	defer page.end() // after the deletes: the shards may cache the keys again
	busy, err := page.wait(ctx)
	if err != nil {
		return err
	}
	del(busy)
	return nil
}

// clearPage is one page of a Clear, spread over the shards of its keys.
type clearPage struct {
	set   *Set
	n     int // keys in the page
	parts []*clearPart
}

// clearPart is the part of a clearPage on one shard.
type clearPart struct {
	s    *shard
	keys []string
	idx  []int // the index of each key in the page
	// Written by the actor before done is closed; read-only after.
	busy     []bool
	closed   bool // the shard was closing: it allowed nothing
	accepted bool // the shard's door took the message: End must be sent
	done     chan struct{}
}

// endClear tells a shard that the store deletes of a page part are over.
type endClear struct{ p *clearPart }

// beginClear asks the shards of keys which of them may be deleted. The
// message goes to every shard before any answer is awaited. The caller
// must call end once, whatever wait returns.
func (set *Set) beginClear(keys []string) *clearPage {
	page := &clearPage{set: set, n: len(keys)}
	byShard := make(map[*shard]*clearPart)
	for i, k := range keys {
		s := set.shardOf(k)
		p := byShard[s]
		if p == nil {
			p = &clearPart{s: s, done: make(chan struct{})}
			byShard[s] = p
			page.parts = append(page.parts, p)
		}
		p.keys = append(p.keys, k)
		p.idx = append(p.idx, i)
	}
	for _, p := range page.parts {
		p.accepted = p.s.sendIfOpen((*clearMsg)(p))
		if !p.accepted {
			p.closed = true
			close(p.done)
		}
	}
	return page
}

// wait returns, for each key given to beginClear, whether it is busy (in
// flight on its shard); the others may be deleted. It returns store.ErrClosed
// when a shard is closing, or ctx's error when ctx ends first.
func (page *clearPage) wait(ctx context.Context) ([]bool, error) {
	busy := make([]bool, page.n)
	for _, p := range page.parts {
		select {
		case <-p.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-page.set.done:
			return nil, store.ErrClosed
		}
		if p.closed {
			return nil, store.ErrClosed
		}
		for j, i := range p.idx {
			busy[i] = p.busy[j]
		}
	}
	return busy, nil
}

// end tells every shard of the page that its store deletes are over: each
// caches its allowed keys again. Call it once, after the deletes, also when
// wait failed or ctx ended: a shard that allowed keys waits for it.
func (page *clearPage) end() {
	select {
	case <-page.set.done:
		return // the shards are gone, and their LRUs with them
	default:
	}
	for _, p := range page.parts {
		if p.accepted {
			p.s.send(&endClear{p: p})
		}
	}
}

// onClear answers a page part: a key with an entry is busy; any other is
// dropped from the LRU and marked as being cleared until the part ends.
func (s *shard) onClear(p *clearPart) {
	defer close(p.done)
	if s.closing {
		p.closed = true
		return
	}
	p.busy = make([]bool, len(p.keys))
	for j, k := range p.keys {
		// A run in flight here keeps its result: a key with an entry, or
		// with a direct owner the shard has not heard of (direct.go).
		if s.entries[k] != nil || s.hasDirect(k) {
			p.busy[j] = true
			continue
		}
		s.dir.keyDrops[busySlot(k)].begin() // ended by onEndClear
		if s.cache != nil {
			s.cache.Remove(k)
		}
		if s.clearing == nil {
			s.clearing = make(map[string]int)
		}
		s.clearing[k]++
	}
}

// onEndClear ends a page part: its allowed keys may be cached again (by
// entries created from now on: see entry.noCache).
func (s *shard) onEndClear(p *clearPart) {
	if p.closed {
		return
	}
	for j, k := range p.keys {
		if p.busy[j] {
			continue
		}
		s.dir.keyDrops[busySlot(k)].end()
		if n := s.clearing[k]; n > 1 {
			s.clearing[k] = n - 1
		} else {
			delete(s.clearing, k)
		}
	}
}

// dropCached asks a shard to drop from its LRU every key that starts with
// prefix.
type dropCached struct {
	prefix string
	done   chan struct{}
}

// DropCached drops from every shard's LRU the keys that start with prefix
// (all of them for ""), on each shard's goroutine: after every message sent
// to the shard before. The message goes to every shard before any is
// awaited. It returns once every shard is done, or ctx's error when ctx ends
// first, or store.ErrClosed when the runtime is closing.
func (set *Set) DropCached(ctx context.Context, prefix string) error {
	if set.cfg.CacheEntries == 0 {
		return nil
	}
	msgs := make([]*dropCached, len(set.shards))
	for i, s := range set.shards {
		m := &dropCached{prefix: prefix, done: make(chan struct{})}
		if !s.sendIfOpen(m) {
			return store.ErrClosed
		}
		msgs[i] = m
	}
	for _, m := range msgs {
		select {
		case <-m.done:
		case <-ctx.Done():
			return ctx.Err()
		case <-set.done:
			return store.ErrClosed
		}
	}
	return nil
}

func (s *shard) onDropCached(m *dropCached) {
	defer close(m.done)
	if s.cache == nil {
		return
	}
	defer s.allDrop()()
	for _, k := range s.cache.Keys() {
		if strings.HasPrefix(k, m.prefix) {
			s.cache.Remove(k)
		}
	}
}

// clearMsg carries a *clearPart through the actor's mailbox (see
// requestMsg).
type clearMsg clearPart

func (*clearMsg) IgnoreDeadLetterLogging()   {}
func (*endClear) IgnoreDeadLetterLogging()   {}
func (*dropCached) IgnoreDeadLetterLogging() {}
