package main

import (
	"context"
	"testing"

	idemrt "github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

// The CLI's forget and clear reach the cache of a runtime that shares the
// store: its next call of each key runs again.
func TestForgetAndClearReachRuntimes(t *testing.T) {
	f := single(t)
	rt := idemtest.Runtime(t, idemrt.Options{Store: f.s})
	runs := map[string]int{}
	do := func(key string, want idemrt.Outcome) {
		t.Helper()
		var out idemrt.Outcome
		_, err := idemrt.Do(bg, rt, key, func(context.Context) (string, error) { runs[key]++; return "v", nil }, idemrt.WithOutcome(&out))
		if err != nil || out != want {
			t.Fatalf("%s: %v %v, want %v", key, out, err, want)
		}
	}
	one, two := store.BuildKey("one", scopeA), store.BuildKey("two", scopeA)
	for _, k := range []string{one, two} {
		do(k, idemrt.Executed)
		do(k, idemrt.Replayed) // from the cache
	}
	f.idem("forget", one).want(t, exitOK)
	idemtest.Eventually(t, "the runtime drops the forgotten key", func() bool { return rt.Stats().CacheDrops >= 1 })
	do(one, idemrt.Executed)
	f.idem("-namespace", scopeA.Namespace, "-version", scopeA.Version, "clear", "-yes").want(t, exitOK)
	idemtest.Eventually(t, "the runtime drops the cleared scope", func() bool { return rt.Stats().CacheEntries == 0 })
	do(one, idemrt.Executed)
	do(two, idemrt.Executed)
	if runs[one] != 3 || runs[two] != 2 {
		t.Fatalf("runs: %v", runs)
	}
}
