package idem_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
)

// The hot cache holds results within its byte bound, least recently used
// out first; a result heavier than the bound is not cached, and its
// replays come from the store.
func TestCacheBytesBound(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{Shards: 1, CacheBytes: 10_000})
	ctx := context.Background()
	value := strings.Repeat("v", 3000)
	for i := range 10 {
		key := "k" + string(rune('a'+i))
		if _, err := idem.Do(ctx, rt, key, idemtest.Value(value)); err != nil {
			t.Fatal(err)
		}
		// The owner may have its answer before its shard caches the
		// result (it completes the key itself).
		want := min(i+1, 3)
		idemtest.Eventually(t, "the result to be cached", func() bool { return rt.Stats().CacheEntries == want })
		if st := rt.Stats(); st.CacheBytes > 10_000 || st.CacheBytes < int64(3000*want) {
			t.Fatalf("after %d results the cache holds %d bytes (%d entries), want %d results within 10000", i+1, st.CacheBytes, st.CacheEntries, want)
		}
	}
	// The most recent is cached, the oldest was evicted: both replay.
	for _, key := range []string{"ka", "kj"} {
		var out idem.Outcome
		if v, err := idem.Do(ctx, rt, key, idemtest.MustNotRun(t), idem.WithOutcome(&out)); err != nil || v != value || out != idem.Replayed {
			t.Fatalf("%s: %d bytes, %v, %v", key, len(v), err, out)
		}
	}

	before := rt.Stats()
	huge := strings.Repeat("h", 20_000)
	if _, err := idem.Do(ctx, rt, "huge", idemtest.Value(huge)); err != nil {
		t.Fatal(err)
	}
	idemtest.Eventually(t, "the shard to be done with the key", func() bool { return rt.Stats().InFlight == 0 })
	if st := rt.Stats(); st.CacheBytes > 10_000 || st.CacheEntries > before.CacheEntries {
		t.Fatalf("a result over the bound was cached: %+v", st)
	}
	opsBefore := rt.Stats().Ops
	if v, err := idem.Do(ctx, rt, "huge", idemtest.MustNotRun(t)); err != nil || v != huge {
		t.Fatalf("huge replay: %d bytes, %v", len(v), err)
	}
	if rt.Stats().Ops == opsBefore {
		t.Fatal("the huge result's replay did not go to the store")
	}

	if _, err := idem.New(idem.Options{CacheBytes: -1}); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Fatalf("negative CacheBytes: %v", err)
	}
}
