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
//
// Each benchmark runs one sub-benchmark per impl (idem, idem-store,
// singleflight+lru, singleflight), named after it.

type receipt struct {
	ID     string
	Amount int
}

// chargeFunc is the side effect the benchmarks run once per key.
type chargeFunc = func(context.Context) (receipt, error)

func charge(_ context.Context) (receipt, error) { return receipt{ID: "r-1", Amount: 4200}, nil }

// handMade is the singleflight + expirable LRU baseline, running fn once per
// key.
type handMade struct {
	fn  chargeFunc
	g   singleflight.Group
	lru *expirable.LRU[string, receipt]
}

func newHandMade(fn chargeFunc) *handMade {
	return &handMade{fn: fn, lru: expirable.NewLRU[string, receipt](65536, nil, 24*time.Hour)}
}

func (h *handMade) do(ctx context.Context, key string) (receipt, error) {
	if v, ok := h.lru.Get(key); ok {
		return v, nil
	}
	v, err, _ := h.g.Do(key, func() (any, error) {
		if v, ok := h.lru.Get(key); ok {
			return v, nil
		}
		r, err := h.fn(ctx)
		if err == nil {
			h.lru.Add(key, r)
		}
		return r, err
	})
	return v.(receipt), err
}

// impl is one way of running fn once per key. start sets it up for one
// sub-benchmark (the test closes what it opens) and returns the call to
// measure.
type impl struct {
	name  string
	start func(b *testing.B, fn chargeFunc) (call func(key string) error)
}

var (
	viaIdem         = impl{"idem", idemImpl(idem.Options{})}
	viaIdemStore    = impl{"idem-store", idemImpl(idem.Options{DisableCache: true})} // every replay from the store
	viaHandMade     = impl{"singleflight+lru", handMadeImpl}
	viaSingleflight = impl{"singleflight", singleflightImpl}
)

func idemImpl(opts idem.Options) func(*testing.B, chargeFunc) func(string) error {
	return func(b *testing.B, fn chargeFunc) func(string) error {
		rt := idemtest.Runtime(b, opts)
		return func(key string) error {
			_, err := idem.Do(bg, rt, key, fn)
			return err
		}
	}
}

func handMadeImpl(_ *testing.B, fn chargeFunc) func(string) error {
	h := newHandMade(fn)
	return func(key string) error {
		_, err := h.do(bg, key)
		return err
	}
}

// singleflightImpl coalesces the calls in flight and keeps no result.
func singleflightImpl(_ *testing.B, fn chargeFunc) func(string) error {
	var g singleflight.Group
	return func(key string) error {
		_, err, _ := g.Do(key, func() (any, error) { return fn(bg) })
		return err
	}
}

// benchParallel runs one sub-benchmark per impl of charge: setup, if set,
// prepares the impl's call, then b.RunParallel's goroutines call it, the
// n-th of them for the keys that keys(n) returns, one per call. Starting
// the impl and the setup are not counted: with -benchtime 20000x, starting
// a runtime (its actor system) would otherwise add several allocations to
// every call.
func benchParallel(b *testing.B, impls []impl, setup func(b *testing.B, call func(string) error), keys func(n int) func() string) {
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			call := im.start(b, charge)
			if setup != nil {
				setup(b, call)
			}
			b.ResetTimer()
			b.ReportAllocs()
			var goroutines atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				next := keys(int(goroutines.Add(1)))
				for pb.Next() {
					if err := call(next()); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

var keySeq atomic.Int64

func uniqueKey() string { return "order-" + strconv.FormatInt(keySeq.Add(1), 10) }

// BenchmarkUniqueKeys: every call is for a new key.
func BenchmarkUniqueKeys(b *testing.B) {
	benchParallel(b, []impl{viaIdem, viaHandMade, viaSingleflight}, nil,
		func(int) func() string { return uniqueKey })
}

const replayKeys = 1 << 14

// BenchmarkReplay: calls for 16384 completed keys, each goroutine walking
// them from its own starting point.
func BenchmarkReplay(b *testing.B) {
	keys := make([]string, replayKeys)
	for i := range keys {
		keys[i] = "order-" + strconv.Itoa(i)
	}
	complete := func(b *testing.B, call func(string) error) {
		for _, k := range keys {
			_ = call(k)
		}
		b.ResetTimer()
	}
	benchParallel(b, []impl{viaIdem, viaIdemStore, viaHandMade}, complete,
		func(n int) func() string {
			i := n * 7919
			return func() string { i++; return keys[i%replayKeys] }
		})
}

// BenchmarkHotKey: every goroutine calls the same completed key. The
// singleflight keeps no result: every call that finds no run in flight runs
// again.
func BenchmarkHotKey(b *testing.B) {
	complete := func(_ *testing.B, call func(string) error) { _ = call("hot") }
	benchParallel(b, []impl{viaIdem, viaHandMade, viaSingleflight}, complete,
		func(int) func() string { return func() string { return "hot" } })
}

// BenchmarkStorm: each op is one key called by 64 goroutines at once, whose
// function takes 100µs; reported per storm. The sub-benchmark named
// singleflight+lru has always measured the singleflight alone (its LRU is
// not consulted, so a caller arriving after the run runs it again); it
// keeps its name so that results compare across versions.
func BenchmarkStorm(b *testing.B) {
	const callers = 64
	slow := func(ctx context.Context) (receipt, error) {
		time.Sleep(100 * time.Microsecond) // the function's work, in real time: the storm joins it
		return charge(ctx)
	}
	for _, im := range []impl{viaIdem, {"singleflight+lru", singleflightImpl}} {
		b.Run(im.name, func(b *testing.B) {
			call := im.start(b, slow)
			do := func(key string) {
				if err := call(key); err != nil {
					b.Error(err)
				}
			}
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
		})
	}
}
