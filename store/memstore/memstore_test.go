package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
	"github.com/idemrt/idem/store/storetest"
)

// epoch is when the tests' fake clocks start.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeClockHarness runs each store of a suite on a fake clock of its own,
// which Advance moves.
func fakeClockHarness() storetest.Harness {
	var mu sync.Mutex
	clocks := map[testing.TB]*clock.Fake{}
	return storetest.Harness{
		New: func(t testing.TB) store.Store {
			c := clock.NewFake(epoch)
			mu.Lock()
			clocks[t] = c
			mu.Unlock()
			s := memstore.New(memstore.Options{Clock: c})
			t.Cleanup(func() { s.Close() })
			return s
		},
		Advance: func(t testing.TB, d time.Duration) {
			mu.Lock()
			c := clocks[t]
			mu.Unlock()
			c.Advance(d)
		},
		Unit:  time.Second,
		Exact: true,
	}
}

func TestConformance(t *testing.T) {
	h := fakeClockHarness()
	h.Seeds = 20
	storetest.Run(t, h)
}

// Expired records leave memory without anyone reading them again.
func TestExpiredRecordsAreRemoved(t *testing.T) {
	c := clock.NewFake(epoch)
	s := memstore.New(memstore.Options{Clock: c})
	ctx := context.Background()
	for i := range 1000 {
		key := fmt.Sprint("k", i)
		res, err := s.Claim(ctx, key, store.ClaimRequest{Owner: "o", Lease: time.Second, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 { // half completed, half abandoned in progress
			if _, err := s.Complete(ctx, key, res.Token, store.Record{Value: []byte("v")}, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := s.Len(); n != 1000 {
		t.Fatalf("Len = %d, want 1000", n)
	}
	c.Advance(2 * time.Minute)
	// Other keys' operations sweep the expired ones out.
	for i := range 2000 {
		if _, err := s.Get(ctx, fmt.Sprint("other", i)); !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
	}
	// The completed ones are gone; the claims still in progress stay (their
	// owners may yet complete them) until space is needed.
	if n := s.Len(); n != 500 {
		t.Fatalf("Len after expiry = %d, want 500 (the claims in progress)", n)
	}
}

// A claim in progress that outlived its lease and TTL is kept for its
// owner while nobody takes it over, and is the first record evicted when
// space is needed: abandoned claims cannot fill the store.
func TestAbandonedClaimsGiveWayFirst(t *testing.T) {
	c := clock.NewFake(epoch)
	s := memstore.New(memstore.Options{Clock: c, MaxRecords: 64 * 4, WhenFull: memstore.EvictWhenFull})
	ctx := context.Background()
	claim := func(key string, lease time.Duration) store.Token {
		t.Helper()
		res, err := s.Claim(ctx, key, store.ClaimRequest{Owner: "o-" + key, Lease: lease, TTL: lease})
		if err != nil || res.Status != store.Claimed {
			t.Fatalf("claim %s: %v %v", key, res.Status, err)
		}
		return res.Token
	}
	slow := claim("slow", time.Second)
	for i := range 200 {
		claim(fmt.Sprint("gone", i), time.Second)
	}
	c.Advance(time.Minute)
	if _, err := s.Complete(ctx, "slow", slow, store.Record{Value: []byte("v")}, time.Hour); err != nil {
		t.Fatalf("a slow owner nobody replaced: %v, want its result stored", err)
	}
	for i := range 1000 {
		k := fmt.Sprint("done", i)
		if _, err := s.Complete(ctx, k, claim(k, time.Hour), store.Record{Value: []byte("v")}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if s.Len() > 64*4+64 {
		t.Fatalf("Len %d: abandoned claims kept the store over its bound", s.Len())
	}
	for i := range 200 {
		k := fmt.Sprint("gone", i)
		res, err := s.Claim(ctx, k, store.ClaimRequest{Owner: "new", Lease: time.Hour, TTL: time.Hour})
		if err != nil || res.Status != store.Claimed || res.Takeover {
			t.Fatalf("abandoned %s: %v %v (takeover %v), want it evicted before the completed records", k, res.Status, err, res.Takeover)
		}
	}
}

// Past MaxRecords, completed records are evicted, oldest first; live claims
// never are.
func TestMaxRecords(t *testing.T) {
	c := clock.NewFake(epoch)
	s := memstore.New(memstore.Options{Clock: c, MaxRecords: 64 * 4, WhenFull: memstore.EvictWhenFull})
	ctx := context.Background()
	claim := func(key string) store.Token {
		res, err := s.Claim(ctx, key, store.ClaimRequest{Owner: "o-" + key, Lease: time.Hour, TTL: time.Hour})
		if err != nil || res.Status != store.Claimed {
			t.Fatalf("claim %s: %v %v", key, res.Status, err)
		}
		return res.Token
	}
	var inProgress []string
	for i := range 200 {
		k := fmt.Sprint("busy", i)
		claim(k)
		inProgress = append(inProgress, k)
	}
	for i := range 5000 {
		k := fmt.Sprint("done", i)
		if _, err := s.Complete(ctx, k, claim(k), store.Record{Value: []byte("v")}, time.Hour); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Millisecond)
	}
	if s.Evicted() == 0 || s.Len() > 64*4+64 {
		t.Fatalf("Len %d, evicted %d: the bound was not kept", s.Len(), s.Evicted())
	}
	for _, k := range inProgress {
		res, err := s.Claim(ctx, k, store.ClaimRequest{Owner: "intruder", Lease: time.Hour, TTL: time.Hour})
		if err != nil || res.Status != store.InProgress {
			t.Fatalf("key in progress %s after evictions: %v %v", k, res.Status, err)
		}
	}
	if _, err := s.Get(ctx, "done4999"); err != nil {
		t.Fatalf("newest record evicted: %v", err)
	}
	if _, err := s.Get(ctx, "done0"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("oldest record kept: %v", err)
	}
}
