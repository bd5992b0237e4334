package storesuite

// Forget and Clear reach every instance's cache (store.Invalidator).

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

// counted is a function that returns key and counts its runs by key.
type counted struct {
	mu   sync.Mutex
	runs map[string]int
}

func (c *counted) fn(key string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.runs == nil {
			c.runs = make(map[string]int)
		}
		c.runs[key]++
		return key, nil
	}
}

func (c *counted) of(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[key]
}

// do calls key on rt and checks the outcome.
func (c *counted) do(t testing.TB, rt *idem.Runtime, key string, want idem.Outcome) {
	t.Helper()
	var out idem.Outcome
	v, err := idem.Do(bg, rt, key, c.fn(key), idem.WithOutcome(&out))
	if err != nil || v != key || out != want {
		t.Fatalf("%s: %q %v %v, want %v", key, v, err, out, want)
	}
}

// Invalidate checks that a Forget and a Clear on instance A (a runtime on
// sa) reach the cache of instance B (a runtime on sb; the two stores see
// the same keys and implement store.Invalidator): B, which cached the
// results, runs the keys again. It logs how long after A's call B's cache
// had dropped them.
func Invalidate(t *testing.T, sa, sb store.Store) {
	a := idemtest.Runtime(t, idem.Options{Store: sa})
	b := idemtest.Runtime(t, idem.Options{Store: sb})
	scope, other := store.Scope{Namespace: "inval", Version: "v1"}, store.Scope{Namespace: "kept", Version: "v1"}
	var c counted
	var keys, others []string
	for i := range 20 {
		keys = append(keys, store.BuildKey(fmt.Sprint("k", i), scope))
		others = append(others, store.BuildKey(fmt.Sprint("k", i), other))
	}
	all := append(append([]string(nil), keys...), others...)
	for i, k := range all { // half run on A, half on B
		rt := a
		if i%2 == 1 {
			rt = b
		}
		c.do(t, rt, k, idem.Executed)
	}
	for _, k := range all { // B caches every result
		c.do(t, b, k, idem.Replayed)
	}
	if n := b.Stats().CacheEntries; n != len(all) {
		t.Fatalf("B caches %d results, want %d", n, len(all))
	}

	// Forget on A: B drops the key and runs it again.
	forgotten := keys[0]
	drops := b.Stats().CacheDrops
	if err := a.Forget(bg, forgotten); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	idemtest.Eventually(t, "B drops the forgotten key", func() bool { return b.Stats().CacheDrops > drops })
	t.Logf("B dropped the forgotten key %v after A's Forget returned", time.Since(start))
	c.do(t, b, forgotten, idem.Executed)
	if n := c.of(forgotten); n != 2 {
		t.Fatalf("the forgotten key ran %d times, want 2", n)
	}

	// Clear of a scope on A: B drops the scope, keeps the rest.
	if _, err := a.Clear(bg, store.Scope{}, idem.ClearOptions{}); err == nil {
		t.Fatal("Clear of the zero Scope without All: no error")
	}
	res, err := a.Clear(bg, scope, idem.ClearOptions{PageSize: 7})
	if err != nil || res.Deleted != len(keys) {
		t.Fatalf("Clear: %+v %v", res, err)
	}
	start = time.Now()
	idemtest.Eventually(t, "B drops the cleared scope", func() bool { return b.Stats().CacheEntries == len(others) })
	t.Logf("B dropped the cleared scope %v after A's Clear returned", time.Since(start))
	for _, k := range keys {
		c.do(t, b, k, idem.Executed)
	}
	for _, k := range others {
		c.do(t, b, k, idem.Replayed)
	}
	if st := b.Stats(); st.Invalidations == 0 || st.CacheDrops < int64(len(keys)+1) {
		t.Fatalf("B's stats: %+v", st)
	}
}

// InvalidateRace checks the race of a store read and an invalidation: B
// reads a key's result from the store (its claim finds it completed), A
// forgets the key and B receives the invalidation, and only then B's read
// comes back. B answers with the result it read (the call was concurrent
// with the Forget), but must not cache it: its next call runs again. The
// same holds for the invalidation of a prefix of the key (a Clear's).
func InvalidateRace(t *testing.T, sa, sb store.Store) {
	ia, ok := sa.(store.Invalidator)
	if !ok {
		t.Fatalf("%T does not implement store.Invalidator", sa)
	}
	a := idemtest.Runtime(t, idem.Options{Store: sa})
	var c counted
	for _, tc := range []struct {
		key        string
		invalidate func() error
		after      idem.Outcome // B's next call
	}{
		{"race-key", func() error { return a.Forget(bg, "race-key") }, idem.Executed},
		// Announced without a delete: B's next call replays from the store.
		{"race-prefix", func() error { return ia.InvalidatePrefix(bg, "race-p") }, idem.Replayed},
	} {
		held := heldRuntime(t, sb, tc.key)
		b := held.rt
		c.do(t, a, tc.key, idem.Executed)
		held.armed.Store(true)
		ch := idemtest.GoDo(bg, b, tc.key, c.fn(tc.key))
		idemtest.Recv(t, held.read) // B's claim has read the result
		if err := tc.invalidate(); err != nil {
			t.Fatal(err)
		}
		idemtest.Eventually(t, "B receives the invalidation", func() bool { return b.Stats().Invalidations > 0 })
		close(held.release) // B's read comes back after the invalidation
		if r := idemtest.Recv(t, ch); r.Err != nil || r.Out != idem.Replayed {
			t.Fatalf("%s: B's call: %+v", tc.key, r)
		}
		if n := b.Stats().CacheEntries; n != 0 {
			t.Fatalf("%s: B cached the result it read before the invalidation (%d entries)", tc.key, n)
		}
		c.do(t, b, tc.key, tc.after)
	}
}

// heldRuntime returns a runtime on s whose first claim of key, once
// armed, is held after the store answered it.
func heldRuntime(t *testing.T, s store.Store, key string) *heldReads {
	iv, ok := s.(store.Invalidator)
	if !ok {
		t.Fatalf("%T does not implement store.Invalidator", s)
	}
	h := &heldReads{Store: s, iv: iv, key: key, read: make(chan struct{}), release: make(chan struct{})}
	h.rt = idemtest.Runtime(t, idem.Options{Store: h})
	return h
}

// heldReads holds the first Claim of key, once armed, after the store
// answered it, until release is closed. It hides every capability of the
// store but the invalidations, so the runtime calls it from a batch
// worker, not from a shard.
type heldReads struct {
	store.Store
	rt      *idem.Runtime
	iv      store.Invalidator
	key     string
	armed   atomic.Bool
	once    sync.Once
	read    chan struct{}
	release chan struct{}
}

func (h *heldReads) Claim(ctx context.Context, key string, req store.ClaimRequest) (store.ClaimResult, error) {
	res, err := h.Store.Claim(ctx, key, req)
	if key == h.key && h.armed.Load() {
		first := false
		h.once.Do(func() { first = true })
		if first {
			close(h.read)
			<-h.release
		}
	}
	return res, err
}

func (h *heldReads) SubscribeInvalidations(ctx context.Context, fn func(store.Invalidation)) (func(), error) {
	return h.iv.SubscribeInvalidations(ctx, fn)
}

func (h *heldReads) InvalidatePrefix(ctx context.Context, prefix string) error {
	return h.iv.InvalidatePrefix(ctx, prefix)
}

// InvalidateLost checks that a lost subscription drops B's whole cache:
// lose cuts B's invalidation subscription (a killed connection, which the
// store reconnects).
func InvalidateLost(t *testing.T, sa, sb store.Store, lose func()) {
	a := idemtest.Runtime(t, idem.Options{Store: sa})
	b := idemtest.Runtime(t, idem.Options{Store: sb})
	var c counted
	for i := range 10 {
		k := fmt.Sprint("lost-", i)
		c.do(t, a, k, idem.Executed)
		c.do(t, b, k, idem.Replayed)
	}
	if n := b.Stats().CacheEntries; n != 10 {
		t.Fatalf("B caches %d results, want 10", n)
	}
	lose()
	idemtest.Eventually(t, "B drops its cache", func() bool { return b.Stats().CacheEntries == 0 })
	if st := b.Stats(); st.Invalidations == 0 || st.CacheDrops < 10 {
		t.Fatalf("B's stats: %+v", st)
	}
}
