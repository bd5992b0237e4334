package idem_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
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

// One hot key parks at most MaxWaitersPerKey callers; the next fails at
// once with ErrOverloaded, and the others keep waiting for the run.
func TestMaxWaitersPerKey(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{Shards: 1, MaxWaitersPerKey: 3})
	ctx := context.Background()
	g := idemtest.NewGate()
	owner := idemtest.GoDo(ctx, rt, "hot", g.Fn("v", nil))
	<-g.Started
	var waiting []<-chan idemtest.Result
	for range 3 {
		waiting = append(waiting, idemtest.GoDo(ctx, rt, "hot", idemtest.MustNotRun(t)))
	}
	idemtest.Eventually(t, "three waiters", func() bool { return rt.Stats().Waiters == 3 })
	if _, err := idem.Do(ctx, rt, "hot", idemtest.MustNotRun(t)); !errors.Is(err, idem.ErrOverloaded) {
		t.Fatalf("a fourth waiter: %v, want ErrOverloaded", err)
	}
	// Another key of the same shard is served.
	if v, err := idem.Do(ctx, rt, "cold", idemtest.Value("c")); err != nil || v != "c" {
		t.Fatalf("another key: %q, %v", v, err)
	}
	close(g.Open)
	if r := idemtest.Recv(t, owner); r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, ch := range waiting {
		if r := idemtest.Recv(t, ch); r.Err != nil || r.V != "v" {
			t.Fatalf("a waiter: %+v", r)
		}
	}
	if _, err := idem.New(idem.Options{MaxWaitersPerKey: -1}); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Fatalf("negative MaxWaitersPerKey: %v", err)
	}
}

// A result over MaxResultBytes is never sent to the store: the owner and
// every waiter get a permanent error matching ErrResultTooLarge, stored in
// its place, and the function ran once.
func TestResultTooLarge(t *testing.T) {
	st := memstore.New(memstore.Options{})
	rt := idemtest.Runtime(t, idem.Options{Store: st, MaxResultBytes: 1000})
	ctx := context.Background()
	g := idemtest.NewGate()
	owner := idemtest.GoDo(ctx, rt, "big", g.Fn(strings.Repeat("x", 2000), nil))
	<-g.Started
	var waiting []<-chan idemtest.Result
	for range 3 {
		waiting = append(waiting, idemtest.GoDo(ctx, rt, "big", idemtest.MustNotRun(t)))
	}
	idemtest.Eventually(t, "three waiters", func() bool { return rt.Stats().Waiters == 3 })
	close(g.Open)
	check := func(who string, err error) {
		t.Helper()
		var ce *idem.CodecError
		if !errors.Is(err, idem.ErrResultTooLarge) || !idem.IsPermanent(err) || !errors.As(err, &ce) {
			t.Fatalf("%s: %v, want a permanent *CodecError matching ErrResultTooLarge", who, err)
		}
	}
	check("owner", idemtest.Recv(t, owner).Err)
	for _, ch := range waiting {
		check("waiter", idemtest.Recv(t, ch).Err)
	}
	if g.Runs() != 1 {
		t.Fatalf("fn ran %d times", g.Runs())
	}
	other := idemtest.Runtime(t, idem.Options{Store: st, DisableCache: true})
	_, err := idem.Do(ctx, other, "big", idemtest.MustNotRun(t))
	check("another instance's replay", err)
	if _, err := idem.New(idem.Options{MaxResultBytes: -1}); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Fatalf("negative MaxResultBytes: %v", err)
	}
}

// A full in-memory store refuses a new key with ErrOverloaded, and keeps
// the results it holds.
func TestFullStoreIsOverload(t *testing.T) {
	st := memstore.New(memstore.Options{MaxRecords: 64})
	rt := idemtest.Runtime(t, idem.Options{Store: st, DisableCache: true})
	ctx := context.Background()
	var err error
	for i := 0; i < 10_000 && err == nil; i++ {
		_, err = idem.Do(ctx, rt, "k"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676)), idemtest.Value("v"))
	}
	if !errors.Is(err, idem.ErrOverloaded) || !errors.Is(err, store.ErrFull) {
		t.Fatalf("a new key in a full store: %v, want ErrOverloaded", err)
	}
	if strings.Count(err.Error(), "idem: ") != 1 || !strings.Contains(err.Error(), ": overloaded (") {
		t.Errorf("the message names the prefix more than once: %q", err)
	}
	if st.EvictedResults() != 0 {
		t.Fatalf("%d results evicted", st.EvictedResults())
	}
}
