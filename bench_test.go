package idem_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"golang.org/x/sync/singleflight"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
)

// The benchmarks compare Do with what a user would write by hand for the same
// job: singleflight to coalesce callers, plus an expirable LRU to keep the
// result. Compare them within one run (benchstat), not across machines.

type receipt struct {
	ID     string
	Amount int
}

func charge(_ context.Context) (receipt, error) { return receipt{ID: "r-1", Amount: 4200}, nil }

// handMade is the singleflight + expirable LRU baseline.
type handMade struct {
	g   singleflight.Group
	lru *expirable.LRU[string, receipt]
}

func newHandMade() *handMade {
	return &handMade{lru: expirable.NewLRU[string, receipt](65536, nil, 24*time.Hour)}
}

func (h *handMade) do(ctx context.Context, key string) (receipt, error) {
	if v, ok := h.lru.Get(key); ok {
		return v, nil
	}
	v, err, _ := h.g.Do(key, func() (any, error) {
		if v, ok := h.lru.Get(key); ok {
			return v, nil
		}
		r, err := charge(ctx)
		if err == nil {
			h.lru.Add(key, r)
		}
		return r, err
	})
	return v.(receipt), err
}

var keySeq atomic.Int64

func uniqueKey() string { return "order-" + strconv.FormatInt(keySeq.Add(1), 10) }

func BenchmarkUniqueKeys(b *testing.B) {
	b.Run("idem", func(b *testing.B) {
		rt := idemtest.Runtime(b, idem.Options{})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := idem.Do(bg, rt, uniqueKey(), charge); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("singleflight+lru", func(b *testing.B) {
		h := newHandMade()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := h.do(bg, uniqueKey()); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("singleflight", func(b *testing.B) {
		var g singleflight.Group
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err, _ := g.Do(uniqueKey(), func() (any, error) { return charge(bg) }); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

const replayKeys = 1 << 14

func replayKeyNames() []string {
	keys := make([]string, replayKeys)
	for i := range keys {
		keys[i] = "order-" + strconv.Itoa(i)
	}
	return keys
}

func BenchmarkReplay(b *testing.B) {
	keys := replayKeyNames()
	b.Run("idem", func(b *testing.B) {
		rt := idemtest.Runtime(b, idem.Options{})
		for _, k := range keys {
			_, _ = idem.Do(bg, rt, k, charge)
		}
		b.ReportAllocs()
		b.ResetTimer()
		var seq atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := int(seq.Add(1)) * 7919
			for pb.Next() {
				i++
				if _, err := idem.Do(bg, rt, keys[i%replayKeys], charge); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("idem-store", func(b *testing.B) {
		rt := idemtest.Runtime(b, idem.Options{DisableCache: true})
		for _, k := range keys {
			_, _ = idem.Do(bg, rt, k, charge)
		}
		b.ReportAllocs()
		b.ResetTimer()
		var seq atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := int(seq.Add(1)) * 7919
			for pb.Next() {
				i++
				if _, err := idem.Do(bg, rt, keys[i%replayKeys], charge); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("singleflight+lru", func(b *testing.B) {
		h := newHandMade()
		for _, k := range keys {
			_, _ = h.do(bg, k)
		}
		b.ReportAllocs()
		b.ResetTimer()
		var seq atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := int(seq.Add(1)) * 7919
			for pb.Next() {
				i++
				if _, err := h.do(bg, keys[i%replayKeys]); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkHotKey: every goroutine calls the same completed key.
func BenchmarkHotKey(b *testing.B) {
	b.Run("idem", func(b *testing.B) {
		rt := idemtest.Runtime(b, idem.Options{})
		_, _ = idem.Do(bg, rt, "hot", charge)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := idem.Do(bg, rt, "hot", charge); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("singleflight+lru", func(b *testing.B) {
		h := newHandMade()
		_, _ = h.do(bg, "hot")
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := h.do(bg, "hot"); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("singleflight", func(b *testing.B) {
		// No result kept: every call that finds no run in flight runs again.
		var g singleflight.Group
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err, _ := g.Do("hot", func() (any, error) { return charge(bg) }); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkStorm: each op is one key called by 64 goroutines at once, whose
// function takes 100µs; reported per storm.
func BenchmarkStorm(b *testing.B) {
	const callers = 64
	slow := func(ctx context.Context) (receipt, error) {
		time.Sleep(100 * time.Microsecond) // the function's work, in real time: the storm joins it
		return charge(ctx)
	}
	run := func(b *testing.B, do func(key string)) {
		b.ReportAllocs()
		for b.Loop() {
			key := uniqueKey()
			done := make(chan struct{}, callers)
			for range callers {
				go func() { do(key); done <- struct{}{} }()
			}
			for range callers {
				<-done
			}
		}
	}
	b.Run("idem", func(b *testing.B) {
		rt := idemtest.Runtime(b, idem.Options{})
		run(b, func(key string) {
			if _, err := idem.Do(bg, rt, key, slow); err != nil {
				b.Error(err)
			}
		})
	})
	b.Run("singleflight+lru", func(b *testing.B) {
		h := newHandMade()
		run(b, func(key string) {
			_, _, _ = h.g.Do(key, func() (any, error) { return slow(bg) })
		})
	})
}
