package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// A claim its owner keeps renewing is live, not abandoned, when the queue
// item of its first claim (claim + lease + TTL) falls due: a new claim on a
// full shard does not evict it, so no second owner gets the key.
func TestRenewedClaimNotEvicted(t *testing.T) {
	c := clock.NewFake(epoch)
	s := memstore.New(memstore.Options{Clock: c, MaxRecords: 64, WhenFull: memstore.EvictWhenFull}) // one record per shard
	ctx := context.Background()
	keys := sameShard(2)
	const lease, ttl = 3 * time.Second, time.Second
	a, err := s.Claim(ctx, keys[0], store.ClaimRequest{Owner: "a", Lease: lease, TTL: ttl})
	if err != nil || a.Status != store.Claimed {
		t.Fatalf("claim: %v %v", a.Status, err)
	}
	for range 3 { // renew every second: the lease runs until 6s
		c.Advance(time.Second)
		if err := s.Renew(ctx, keys[0], a.Token, lease); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(1500 * time.Millisecond) // 4.5s: lease live until 6s; the claim's first item (4s) is due
	if _, err := s.Claim(ctx, keys[1], store.ClaimRequest{Owner: "x", Lease: lease, TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	b, err := s.Claim(ctx, keys[0], store.ClaimRequest{Owner: "b", Lease: lease, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if b.Status != store.InProgress {
		t.Errorf("a claim whose lease runs 1.5s more was evicted: a second owner claimed it (status %v, evicted %d)", b.Status, s.Evicted())
	}
	if _, err := s.Complete(ctx, keys[0], a.Token, store.Record{Value: []byte("v")}, ttl); err != nil {
		t.Errorf("the renewed owner's Complete: %v", err)
	}
}

// A takeover reuses the record, so the queue item of the claim it replaced
// still names it; when that item falls due, the new owner's fresh claim is
// not taken for abandoned nor evicted.
func TestTakeoverClaimNotEvicted(t *testing.T) {
	c := clock.NewFake(epoch)
	s := memstore.New(memstore.Options{Clock: c, MaxRecords: 64, WhenFull: memstore.EvictWhenFull}) // one record per shard
	ctx := context.Background()
	keys := sameShard(2)
	if _, err := s.Claim(ctx, keys[0], store.ClaimRequest{Owner: "a", Lease: time.Second, TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	c.Advance(1500 * time.Millisecond) // A's lease is over: B takes the key over with a 1 min lease
	b, err := s.Claim(ctx, keys[0], store.ClaimRequest{Owner: "b", Lease: time.Minute, TTL: time.Second})
	if err != nil || b.Status != store.Claimed || !b.Takeover {
		t.Fatalf("takeover: %+v %v", b, err)
	}
	c.Advance(time.Second) // 2.5 s: A's old item (2 s) is due; B's lease runs to 61.5 s
	if _, err := s.Claim(ctx, keys[1], store.ClaimRequest{Owner: "x", Lease: time.Minute, TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	d, err := s.Claim(ctx, keys[0], store.ClaimRequest{Owner: "d", Lease: time.Minute, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != store.InProgress {
		t.Errorf("B's claim, 59 s of lease left, was evicted: a third owner claimed the key (status %v, evicted %d)", d.Status, s.Evicted())
	}
	if _, err := s.Complete(ctx, keys[0], b.Token, store.Record{Value: []byte("v")}, time.Second); err != nil {
		t.Errorf("B's Complete: %v", err)
	}
}
