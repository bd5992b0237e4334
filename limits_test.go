package idem_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// Options and call options at their limits: sizes near math.MaxInt mean
// "very large", durations past store.MaxDuration are refused, and the
// longest ones allowed work.

// A "forever" TTL is refused with a clear error (it once overflowed the
// in-memory store's time arithmetic and made claims born expired); the
// longest TTL allowed works.
func TestHugeTTL(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	for _, opt := range []idem.CallOption{idem.WithTTL(math.MaxInt64), idem.WithLease(math.MaxInt64)} {
		if _, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t), opt); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Fatalf("huge duration: %v, want ErrInvalidArgument", err)
		}
	}
	if _, err := idem.New(idem.Options{Policy: idem.Policy{TTL: math.MaxInt64}}); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Fatalf("New with a huge TTL: %v", err)
	}
	v, err := idem.Do(bg, rt, "k", idemtest.Value("v"), idem.WithTTL(store.MaxDuration), idem.WithLease(store.MaxDuration))
	if err != nil || v != "v" {
		t.Fatalf("Do with the longest TTL and lease: %q, %v", v, err)
	}
	if v, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t)); err != nil || v != "v" {
		t.Fatalf("replay: %q, %v", v, err)
	}
}

// With the longest TTL, a second runtime sharing the store does not run fn
// while the first runs it.
func TestLongestTTLNoDoubleRun(t *testing.T) {
	mem := memStore(nil)
	rtA := idemtest.Runtime(t, idem.Options{Store: mem})
	rtB := idemtest.Runtime(t, idem.Options{Store: mem})
	g := idemtest.NewGate()
	a := idemtest.GoDo(bg, rtA, "k", g.Fn("A", nil), idem.WithTTL(store.MaxDuration))
	<-g.Started
	var runs atomic.Int32
	_, err := idem.Do(bg, rtB, "k", func(context.Context) (string, error) {
		runs.Add(1)
		return "B", nil
	}, idem.WithTTL(store.MaxDuration), idem.WithFailFast())
	if !errors.Is(err, idem.ErrConflict) {
		t.Errorf("B: %v, want ErrConflict", err)
	}
	close(g.Open)
	idemtest.Recv(t, a)
	if runs.Load() != 0 {
		t.Fatalf("fn ran on B while A ran it: %d extra runs", runs.Load())
	}
}

// MaxRecords near math.MaxInt means "very large": results are kept, none is
// evicted (an overflow once made every claim evict a result).
func TestHugeMaxRecordsKeepsResults(t *testing.T) {
	for _, n := range []int{math.MaxInt, math.MaxInt - 1, math.MaxInt - 63} {
		mem := memstore.New(memstore.Options{MaxRecords: n})
		rt := idemtest.Runtime(t, idem.Options{Store: mem})
		for i := range 200 {
			if _, err := idem.Do(bg, rt, fmt.Sprint("k", i), idemtest.Value("v")); err != nil {
				t.Fatal(err)
			}
		}
		if mem.Evicted() != 0 || mem.Len() != 200 {
			t.Fatalf("MaxRecords %d: %d evicted, %d kept; want 0 and 200", n, mem.Evicted(), mem.Len())
		}
	}
}

// CacheEntries near math.MaxInt means "very large": the hot cache serves
// replays without a store operation (an overflow once turned it off).
func TestHugeCacheEntriesKeepsCache(t *testing.T) {
	for _, n := range []int{math.MaxInt, math.MaxInt - 1} {
		rt := idemtest.Runtime(t, idem.Options{CacheEntries: n, Shards: 3})
		if _, err := idem.Do(bg, rt, "k", idemtest.Value("v")); err != nil {
			t.Fatal(err)
		}
		ops := rt.Stats().Ops
		if v, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t)); err != nil || v != "v" {
			t.Fatalf("replay: %q %v", v, err)
		}
		if got := rt.Stats().Ops; got != ops {
			t.Fatalf("CacheEntries %d: the replay made %d store operations; want it served by the cache", n, got-ops)
		}
	}
}
