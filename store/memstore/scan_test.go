package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// A scan of a store larger than a page's budget visits every key exactly
// once, over pages that each stay within the limit.
func TestScanLargeStoreEachKeyOnce(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.Options{Clock: clock.NewFake(epoch)})
	defer s.Close()
	const n = 20000
	for i := range n {
		key := fmt.Sprint("k", i)
		if _, err := s.Claim(ctx, key, store.ClaimRequest{Owner: "o", Lease: time.Minute, TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int{1000, 7} {
		seen := map[string]int{}
		cursor, pages := "", 0
		for {
			keys, next, err := s.Scan(ctx, "", cursor, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) > limit {
				t.Fatalf("page of %d keys, limit %d", len(keys), limit)
			}
			for _, k := range keys {
				seen[k]++
			}
			pages++
			if next == "" {
				break
			}
			cursor = next
		}
		if len(seen) != n {
			t.Fatalf("limit %d: %d distinct keys, want %d", limit, len(seen), n)
		}
		for k, c := range seen {
			if c != 1 {
				t.Fatalf("limit %d: key %q returned %d times", limit, k, c)
			}
		}
		t.Logf("limit %d: %d pages", limit, pages)
	}
}

// Scan skips completed records whose TTL has passed, even before a sweep
// removes them.
func TestScanSkipsExpired(t *testing.T) {
	ctx := context.Background()
	c := clock.NewFake(epoch)
	s := memstore.New(memstore.Options{Clock: c})
	defer s.Close()
	res, err := s.Claim(ctx, "k", store.ClaimRequest{Owner: "o", Lease: time.Minute, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(ctx, "k", res.Token, store.Record{}, time.Second); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	keys, next, err := s.Scan(ctx, "", "", 10)
	if err != nil || len(keys) != 0 || next != "" {
		t.Fatalf("Scan = %q, %q, %v; want nothing", keys, next, err)
	}
}

func TestScanBadCursor(t *testing.T) {
	s := memstore.New(memstore.Options{})
	defer s.Close()
	for _, c := range []string{"x", "64:", "-1:", "1"} {
		if _, _, err := s.Scan(context.Background(), "", c, 10); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("Scan with cursor %q: %v, want ErrInvalidArgument", c, err)
		}
	}
}
