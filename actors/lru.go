package actors

import (
	"hash/maphash"
	"sync"
)

// resultLRU is a shard's cache of settled results: a least-recently-used
// map of at most size entries, safe for concurrent use (callers read it on
// the hit path, the shard's goroutine writes it).
//
// It does what hashicorp/golang-lru's Cache did here, with less work for
// the path that adds every executed key's result: Add of a new key to a
// full cache moves the oldest entry's memory to the new key instead of
// allocating one (a cache of unique keys stays full, so that is every Add),
// and a key already held is replaced in place, where the shard used to
// Remove it first (a lookup, a delete and a callback more per result).
//
// Its index is a table of its own (lruIndex), not a Go map: a full cache
// deletes a key for each one it adds, and a Go map keeps the deleted slots
// as tombstones that lengthen every lookup of a key it does not hold, which
// is what every call of a new key does first (the profile of the
// unique-keys scenario put most of the hit path's time in such probes).
//
// onEvict is called, under the lock, with every value that leaves the
// cache: evicted, removed, replaced or purged. It must not call back into
// the cache.
type resultLRU struct {
	mu      sync.Mutex
	size    int
	items   lruIndex
	root    lruEntry // root.next is the newest entry, root.prev the oldest
	onEvict func(Cached)
}

type lruEntry struct {
	key        string
	hash       uint64 // of key, by the index's seed
	val        Cached
	prev, next *lruEntry
}

// newResultLRU returns an empty cache of at most size (> 0) entries.
func newResultLRU(size int, onEvict func(Cached)) *resultLRU {
	// A cache holds one result at least: Add evicts until the new entry
	// fits, which a size below one never lets it do.
	c := &resultLRU{size: max(size, 1), onEvict: onEvict}
	c.items.seed = maphash.MakeSeed()
	c.items.init()
	c.root.next, c.root.prev = &c.root, &c.root
	return c
}

func (c *resultLRU) unlink(e *lruEntry) {
	e.prev.next = e.next
	e.next.prev = e.prev
}

func (c *resultLRU) pushFront(e *lruEntry) {
	e.prev, e.next = &c.root, c.root.next
	c.root.next.prev = e
	c.root.next = e
}

// Add keeps val as key's value, the newest entry, and reports whether it
// evicted the oldest entry to make room.
func (c *resultLRU) Add(key string, val Cached) (evicted bool) {
	h := c.items.hash(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.items.get(key, h); e != nil {
		old := e.val
		e.val = val
		c.unlink(e)
		c.pushFront(e)
		c.onEvict(old)
		return false
	}
	var e *lruEntry
	if c.items.n >= c.size {
		// Full: the oldest entry's memory goes to the new key.
		e = c.root.prev
		c.unlink(e)
		c.items.remove(e)
		old := e.val
		*e = lruEntry{}
		c.onEvict(old)
		evicted = true
	} else {
		e = new(lruEntry)
	}
	e.key, e.hash, e.val = key, h, val
	c.items.put(e)
	c.pushFront(e)
	return evicted
}

// Get returns key's value and makes it the newest entry, if the cache
// holds key.
func (c *resultLRU) Get(key string) (Cached, bool) {
	h := c.items.hash(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.items.get(key, h)
	if e == nil {
		return Cached{}, false
	}
	if c.root.next != e {
		c.unlink(e)
		c.pushFront(e)
	}
	return e.val, true
}

// Remove drops key's entry and reports whether there was one.
func (c *resultLRU) Remove(key string) bool {
	h := c.items.hash(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.items.get(key, h)
	if e == nil {
		return false
	}
	c.drop(e)
	return true
}

// RemoveOldest drops the oldest entry and returns it, if there is one.
func (c *resultLRU) RemoveOldest() (string, Cached, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.root.prev
	if e == &c.root {
		return "", Cached{}, false
	}
	key, val := e.key, e.val
	c.drop(e)
	return key, val, true
}

func (c *resultLRU) drop(e *lruEntry) {
	c.unlink(e)
	c.items.remove(e)
	old := e.val
	*e = lruEntry{} // a Get may have copied e.val; e itself is garbage now
	c.onEvict(old)
}

// Keys returns the keys held, oldest first.
func (c *resultLRU) Keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, c.items.n)
	for e := c.root.prev; e != &c.root; e = e.prev {
		keys = append(keys, e.key)
	}
	return keys
}

// Len returns how many entries the cache holds.
func (c *resultLRU) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.items.n
}

// Purge drops every entry.
func (c *resultLRU) Purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.root.prev; e != &c.root; {
		prev := e.prev
		c.onEvict(e.val)
		*e = lruEntry{}
		e = prev
	}
	c.items.init() // the old table's memory goes too
	c.root.next, c.root.prev = &c.root, &c.root
}

// lruIndex finds a resultLRU's entries by key: open addressing with linear
// probing, at most half full, and deletion by moving the entries after the
// deleted one back (no tombstones), so that a key it does not hold is found
// missing at the first empty slot, a slot or two away. Each slot keeps its
// entry's hash, so that a probe reads the entry itself only when the hash
// matches. It grows with the entries it holds, as a map would.
type lruIndex struct {
	seed  maphash.Seed
	slots []indexSlot // a power of two of them
	n     int
}

type indexSlot struct {
	hash uint64
	e    *lruEntry // nil: empty
}

const minIndexSlots = 16

// init empties the index. (The seed stays: a hash computed before the
// lock was taken is still the key's.)
func (x *lruIndex) init() {
	x.slots = make([]indexSlot, minIndexSlots)
	x.n = 0
}

// hash is safe to call without the cache's lock: the seed never changes.
func (x *lruIndex) hash(key string) uint64 { return maphash.String(x.seed, key) }

func (x *lruIndex) mask() uint64 { return uint64(len(x.slots) - 1) }

// get returns the entry of key, whose hash is h, or nil.
func (x *lruIndex) get(key string, h uint64) *lruEntry {
	m := x.mask()
	for i := h & m; ; i = (i + 1) & m {
		sl := &x.slots[i]
		if sl.e == nil {
			return nil
		}
		if sl.hash == h && sl.e.key == key {
			return sl.e
		}
	}
}

// put adds e, whose key it does not hold.
func (x *lruIndex) put(e *lruEntry) {
	if 2*(x.n+1) > len(x.slots) {
		old := x.slots
		x.slots = make([]indexSlot, 2*len(old))
		for _, o := range old {
			if o.e != nil {
				x.place(o)
			}
		}
	}
	x.place(indexSlot{hash: e.hash, e: e})
	x.n++
}

func (x *lruIndex) place(sl indexSlot) {
	m := x.mask()
	i := sl.hash & m
	for x.slots[i].e != nil {
		i = (i + 1) & m
	}
	x.slots[i] = sl
}

// remove drops e, which it holds.
func (x *lruIndex) remove(e *lruEntry) {
	m := x.mask()
	i := e.hash & m
	for x.slots[i].e != e {
		i = (i + 1) & m
	}
	// Move back each later entry of the run whose home slot is not
	// between the hole and itself: its probe from home would otherwise
	// stop at the hole.
	for j := (i + 1) & m; x.slots[j].e != nil; j = (j + 1) & m {
		home := x.slots[j].hash & m
		if (j-home)&m >= (j-i)&m {
			x.slots[i] = x.slots[j]
			i = j
		}
	}
	x.slots[i] = indexSlot{}
	x.n--
}
