package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// A full store refuses new keys rather than drop a result before its TTL
// (the default); abandoned claims still give way.
func TestFullStoreRefusesNewKeys(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.Options{MaxRecords: 64 * 2}) // two per shard
	claim := func(key string) (store.ClaimResult, error) {
		return s.Claim(ctx, key, store.ClaimRequest{Owner: "o-" + key, Lease: time.Minute, TTL: time.Hour})
	}
	// Fill every shard with results.
	var stored []string
	for i := 0; len(stored) < 64*2; i++ {
		key := fmt.Sprint("real-", i)
		res, err := claim(key)
		if errors.Is(err, store.ErrFull) {
			continue // its shard is full already
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Complete(ctx, key, res.Token, store.Record{Value: []byte("v")}, time.Hour); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, key)
	}
	// A flood of new keys is refused, every one.
	before := s.Refused()
	refused := 0
	for i := range 1000 {
		if _, err := claim(fmt.Sprint("junk-", i)); errors.Is(err, store.ErrFull) {
			refused++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if refused != 1000 || s.Refused()-before != 1000 {
		t.Fatalf("refused %d of 1000 (counter +%d)", refused, s.Refused()-before)
	}
	if store.Retryable(store.ErrFull) {
		t.Fatal("ErrFull is retryable")
	}
	// Every real result is still there.
	for _, key := range stored {
		if res, err := claim(key); err != nil || res.Status != store.Completed {
			t.Fatalf("%s after the flood: %v %v", key, res.Status, err)
		}
	}
	if s.Evicted() != 0 || s.EvictedResults() != 0 {
		t.Fatalf("evicted %d (results %d)", s.Evicted(), s.EvictedResults())
	}
}

// With EvictWhenFull, the flood evicts results before their TTL, and the
// counter says so.
func TestEvictWhenFullCountsResults(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.Options{MaxRecords: 64, WhenFull: memstore.EvictWhenFull})
	for i := range 500 {
		key := fmt.Sprint("k-", i)
		res, err := s.Claim(ctx, key, store.ClaimRequest{Owner: "o", Lease: time.Minute, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Complete(ctx, key, res.Token, store.Record{Value: []byte("v")}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if s.EvictedResults() == 0 || s.Refused() != 0 {
		t.Fatalf("evicted results %d, refused %d", s.EvictedResults(), s.Refused())
	}
}

// Released and forgotten keys leave nothing behind but what compaction
// bounds: the store's queues do not grow with them.
func TestReleasedKeysFreeTheirMemory(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.Options{})
	const n = 100_000
	for i := range n {
		key := fmt.Sprint("k-", i)
		res, err := s.Claim(ctx, key, store.ClaimRequest{Owner: "o", Lease: time.Minute, TTL: 24 * time.Hour, Fingerprint: make([]byte, 32)})
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := s.Release(ctx, key, res.Token); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := s.Complete(ctx, key, res.Token, store.Record{Value: make([]byte, 100)}, 24*time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := s.Forget(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	records, queued := s.Held()
	if records != 0 {
		t.Fatalf("%d records after every key was released or forgotten", records)
	}
	// At most minCompact (256) stale items per shard wait for compaction.
	if queued > 64*256 {
		t.Fatalf("%d queue entries for %d keys released or forgotten, want at most %d", queued, n, 64*256)
	}
}
