package actors

// White-box tests of a Clear's page on one shard (see Set.Clear): a key in
// flight is busy; another leaves the LRU, and an entry made for it before
// the page ends caches nothing, whatever it finds or stores.

import (
	"testing"

	"github.com/idemrt/idem/store"
)

func withCache(c *Config) { c.CacheEntries = 16 }

// runToCache runs one call of key to a stored result, cached.
func (h *harness) runToCache(key string) {
	h.t.Helper()
	r := h.ask(key)
	h.grant(r)
	h.finish(r, Success, nil)
	h.op(store.OpComplete)
	h.run()
	h.want(r, Reply{Kind: Settled})
	if h.s.lookup(key, h.clk.Now()) == nil {
		h.t.Fatalf("%q not cached after its run", key)
	}
}

// clearKeys hands the shard a page part of keys, as BeginClear does.
func (h *harness) clearKeys(keys ...string) *clearPart {
	p := &clearPart{s: h.s, keys: keys, done: make(chan struct{})}
	h.s.onClear(p)
	select {
	case <-p.done:
	default:
		h.t.Fatal("the page part was not answered")
	}
	return p
}

func TestClearPageBusyAndAllowed(t *testing.T) {
	h := newHarness(t, withCache)
	h.runToCache("cached")
	inFlight := h.ask("in-flight") // its claim is out
	p := h.clearKeys("in-flight", "cached", "absent")
	if p.closed || !p.busy[0] || p.busy[1] || p.busy[2] {
		t.Fatalf("busy = %v, closed %v; want only the key in flight busy", p.busy, p.closed)
	}
	if h.s.lookup("cached", h.clk.Now()) != nil {
		t.Fatal("an allowed key is still cached")
	}
	h.s.onEndClear(p)
	if len(h.s.clearing) != 0 {
		t.Fatalf("clearing after the page ended: %v", h.s.clearing)
	}
	h.grant(inFlight) // the run in flight goes on
}

// An entry made while the page is out finds the record the Clear is about
// to delete, or stores a result the Clear may yet delete: either way it
// caches nothing. Once every page that allowed the key has ended, entries
// cache again.
func TestClearPageEntriesCacheNothing(t *testing.T) {
	h := newHarness(t, withCache)
	h.runToCache("found")
	p1 := h.clearKeys("found", "stored")
	p2 := h.clearKeys("found") // another Clear's page, overlapping

	r := h.ask("found") // the record is still in the store
	h.op(store.OpClaim)
	h.run()
	if rep := h.reply(r); rep.Kind != Settled {
		t.Fatalf("a call during the delete: %s, want the record", fmtReply(rep))
	}
	if h.s.lookup("found", h.clk.Now()) != nil {
		t.Fatal("the record found during the delete was cached")
	}

	r = h.ask("stored")
	h.grant(r)
	h.finish(r, Success, nil)
	h.op(store.OpComplete)
	h.run()
	h.want(r, Reply{Kind: Settled})
	if h.s.lookup("stored", h.clk.Now()) != nil {
		t.Fatal("a result stored during the delete was cached")
	}

	h.s.onEndClear(p1)
	if h.s.clearing["found"] != 1 {
		t.Fatalf("clearing = %v, want found still cleared by the other page", h.s.clearing)
	}
	h.s.onEndClear(p2)
	if len(h.s.clearing) != 0 {
		t.Fatalf("clearing after both pages ended: %v", h.s.clearing)
	}
	r = h.ask("found")
	h.op(store.OpClaim)
	h.run()
	h.reply(r)
	if h.s.lookup("found", h.clk.Now()) == nil {
		t.Fatal("not cached once the pages ended")
	}
	h.idle()
}

func TestClearPageOnClosingShard(t *testing.T) {
	h := newHarness(t, withCache)
	h.runToCache("k")
	h.s.onClosing()
	p := h.clearKeys("k")
	if !p.closed || h.s.lookup("k", h.clk.Now()) == nil {
		t.Fatalf("closing shard: closed %v, key dropped %v; want the part refused", p.closed, h.s.lookup("k", h.clk.Now()) == nil)
	}
	h.s.onEndClear(p) // a refused part ends as a no-op
	if len(h.s.clearing) != 0 {
		t.Fatalf("clearing: %v", h.s.clearing)
	}
}

func TestDropCachedByPrefix(t *testing.T) {
	h := newHarness(t, withCache)
	for _, k := range []string{"a:1", "a:2", "b:1"} {
		h.runToCache(k)
	}
	m := &dropCached{prefix: "a:", done: make(chan struct{})}
	h.s.onDropCached(m)
	<-m.done
	for k, want := range map[string]bool{"a:1": false, "a:2": false, "b:1": true} {
		if got := h.s.lookup(k, h.clk.Now()) != nil; got != want {
			t.Errorf("%q cached: %v, want %v", k, got, want)
		}
	}
}
