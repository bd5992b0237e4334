package main

import (
	"context"
	"strings"
	"testing"
	"time"

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

// clear -yes of an empty scope (every key of the store prefix) needs -all.
func TestClearEmptyScopeNeedsAll(t *testing.T) {
	for _, args := range [][]string{
		{"clear", "-yes"},
		{"-namespace", "", "-version", "", "clear", "-yes"},
	} {
		if r := idem(t, args...); r.code != exitUsage || !strings.Contains(r.err, "pass -all to mean it") {
			t.Errorf("%q: exit %d, stderr %q; want a usage error asking for -all", args, r.code, r.err)
		}
	}
	if r := idem(t, "stats", "-all"); r.code != exitUsage || !strings.Contains(r.err, "-all applies to clear only") {
		t.Errorf("stats -all: exit %d, stderr %q", r.code, r.err)
	}
	f := single(t)
	f.done("k", store.Record{Value: []byte("v")}, time.Hour)
	f.idem("clear", "-yes", "-all").want(t, exitOK)
	if st := f.state("k"); st != store.Absent {
		t.Fatalf("after clear -yes -all: %v", st)
	}
}
