package memstore_test

import (
	"context"
	"testing"
	"time"

	"fmt"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/keyshard"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// sameShard returns n keys that fall in one memstore shard.
func sameShard(n int) []string {
	var keys []string
	want := keyshard.Hash("k0") % 64
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprint("k", i)
		if keyshard.Hash(k)%64 == want {
			keys = append(keys, k)
		}
	}
	return keys
}

// Eviction takes the completed record nearest its expiry, even next to one
// with the longest TTL allowed.
func TestEvictionOrderLongTTL(t *testing.T) {
	c := clock.NewFake(epoch)
	s := memstore.New(memstore.Options{Clock: c, MaxRecords: 2 * 64, WhenFull: memstore.EvictWhenFull})
	ctx := context.Background()
	keys := sameShard(3)
	put := func(key string, ttl time.Duration) {
		res, err := s.Claim(ctx, key, store.ClaimRequest{Owner: key, Lease: time.Second, TTL: ttl})
		if err != nil || res.Status != store.Claimed {
			t.Fatalf("claim %s: %v %v", key, res.Status, err)
		}
		if _, err := s.Complete(ctx, key, res.Token, store.Record{Value: []byte("v")}, ttl); err != nil {
			t.Fatal(err)
		}
	}
	const long = store.MaxDuration
	put(keys[0], long)
	put(keys[1], time.Hour)
	put(keys[2], time.Hour) // the shard is full: one record is evicted
	if _, err := s.Get(ctx, keys[0]); err != nil {
		t.Errorf("the record with %v left was evicted before the one with 1h left: %v", long, err)
	}
}
