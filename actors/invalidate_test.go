package actors

// White-box tests of store invalidations on one shard: what leaves the
// LRU, and which entries with a read out cache nothing afterwards.

import (
	"testing"

	"github.com/idemrt/idem/store"
)

func (h *harness) cached(keys ...string) map[string]bool {
	out := map[string]bool{}
	for _, k := range keys {
		out[k] = h.s.lookup(k, h.clk.Now()) != nil
	}
	return out
}

func TestInvalidateKeyPrefixLost(t *testing.T) {
	h := newHarness(t, withCache)
	keys := []string{"a:1", "a:2", "b:1", "c:1"}
	for _, k := range keys {
		h.runToCache(k)
	}
	h.s.onInvalidate(store.Invalidation{Key: "b:1"})
	h.s.onInvalidate(store.Invalidation{Key: "absent"})
	h.s.onInvalidate(store.Invalidation{Key: "a:", Prefix: true})
	if got := h.cached(keys...); got["a:1"] || got["a:2"] || got["b:1"] || !got["c:1"] {
		t.Fatalf("cached after a key and a prefix: %v", got)
	}
	if n := h.s.nDrops.Load(); n != 3 {
		t.Fatalf("drops %d, want 3", n)
	}
	h.s.onInvalidate(store.Invalidation{Lost: true})
	if got := h.cached(keys...); got["c:1"] || h.s.cache.Len() != 0 || h.s.cacheBytes.Load() != 0 {
		t.Fatalf("cached after a lost subscription: %v, %d entries, %d bytes", got, h.s.cache.Len(), h.s.cacheBytes.Load())
	}
	if n := h.s.nDrops.Load(); n != 4 {
		t.Fatalf("drops %d, want 4", n)
	}
}

// An entry whose claim is out when an invalidation names its key caches
// nothing of what the claim finds (read before the delete); an entry made
// after it caches again.
func TestInvalidateMarksReadsOut(t *testing.T) {
	for _, inv := range []store.Invalidation{{Key: "k"}, {Key: "k", Prefix: true}, {Prefix: true}, {Lost: true}} {
		h := newHarness(t, withCache)
		r := h.ask("k") // its claim is out
		other := h.ask("other")
		h.s.onInvalidate(inv)
		if !h.entry("k").noCache {
			t.Fatalf("%+v: the entry with a read out may cache", inv)
		}
		if want := !inv.Matches("other"); h.entry("other").noCache == want {
			t.Fatalf("%+v: an entry of another key: noCache %v", inv, h.entry("other").noCache)
		}
		h.grant(r)
		h.grant(other)
		h.finish(r, Success, nil)
		h.op(store.OpComplete)
		h.run()
		h.want(r, Reply{Kind: Settled})
		if h.cached("k")["k"] {
			t.Fatalf("%+v: cached after the invalidation", inv)
		}
		h.finish(other, Success, nil)
		h.op(store.OpComplete)
		h.run()
		h.want(other, Reply{Kind: Settled})
		r = h.ask("k") // a new entry: caches what it finds
		h.op(store.OpClaim)
		h.run()
		h.reply(r)
		if !h.cached("k")["k"] {
			t.Fatalf("%+v: an entry made after the invalidation does not cache", inv)
		}
	}
}
