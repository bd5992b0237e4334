package actors

import "sync"

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
// onEvict is called, under the lock, with every value that leaves the
// cache: evicted, removed, replaced or purged. It must not call back into
// the cache.
type resultLRU struct {
	mu      sync.Mutex
	size    int
	items   map[string]*lruEntry
	root    lruEntry // root.next is the newest entry, root.prev the oldest
	onEvict func(Cached)
}

type lruEntry struct {
	key        string
	val        Cached
	prev, next *lruEntry
}

// newResultLRU returns an empty cache of at most size (> 0) entries.
func newResultLRU(size int, onEvict func(Cached)) *resultLRU {
	c := &resultLRU{size: size, items: make(map[string]*lruEntry), onEvict: onEvict}
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.items[key]; e != nil {
		old := e.val
		e.val = val
		c.unlink(e)
		c.pushFront(e)
		c.onEvict(old)
		return false
	}
	var e *lruEntry
	if len(c.items) >= c.size {
		// Full: the oldest entry's memory goes to the new key.
		e = c.root.prev
		c.unlink(e)
		delete(c.items, e.key)
		old := e.val
		*e = lruEntry{}
		c.onEvict(old)
		evicted = true
	} else {
		e = new(lruEntry)
	}
	e.key, e.val = key, val
	c.items[key] = e
	c.pushFront(e)
	return evicted
}

// Get returns key's value and makes it the newest entry, if the cache
// holds key.
func (c *resultLRU) Get(key string) (Cached, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.items[key]
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
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.items[key]
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
	delete(c.items, e.key)
	old := e.val
	*e = lruEntry{} // a Get may have copied e.val; e itself is garbage now
	c.onEvict(old)
}

// Keys returns the keys held, oldest first.
func (c *resultLRU) Keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.items))
	for e := c.root.prev; e != &c.root; e = e.prev {
		keys = append(keys, e.key)
	}
	return keys
}

// Len returns how many entries the cache holds.
func (c *resultLRU) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
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
	c.items = make(map[string]*lruEntry) // the old one's memory goes too
	c.root.next, c.root.prev = &c.root, &c.root
}
