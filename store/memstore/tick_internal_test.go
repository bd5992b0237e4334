package memstore

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
)

// TestLongClaimLaterKeepsItsRemoval: a claim with the longest lease and TTL
// (100 years each, store.MaxDuration) made 60 years after the store (a fake
// clock moved far) is removed lease + TTL later. now + lease + TTL is then
// past the 292 years an int64 of nanoseconds holds from the epoch (50 years
// before the store): unchecked, the sum wrapped negative, the record was
// due at once, marked abandoned at the next operation on its shard, and so
// the first record evicted when space is needed, while its lease ran.
func TestLongClaimLaterKeepsItsRemoval(t *testing.T) {
	c := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := New(Options{Clock: c, MaxRecords: 1 << 10})
	ctx := context.Background()
	c.Advance(60 * 365 * 24 * time.Hour)
	const long = store.MaxDuration
	if _, err := s.Claim(ctx, "k", store.ClaimRequest{Owner: "a", Lease: long, TTL: long}); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	if _, err := s.Inspect(ctx, "k"); err != nil { // sweeps the shard
		t.Fatal(err)
	}
	sh := s.shardOf("k")
	sh.mu.Lock()
	r := sh.records["k"]
	now := s.tickOf(c.Now())
	removeAt, listed := r.removeAt, r.listed
	sh.mu.Unlock()
	if listed || removeAt <= now {
		t.Fatalf("a claim with a 100-year lease, a second old, is due at tick %d (now %d, listed as abandoned %v)", removeAt, now, listed)
	}
	// Another owner must not take it over.
	got, err := s.Claim(ctx, "k", store.ClaimRequest{Owner: "b", Lease: time.Second, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.InProgress {
		t.Fatalf("claim by b of a key a holds for 100 years: %v", got.Status)
	}
}

// TestTakeoverOfLongClaimQueuesNoExtraItem: taking over a claim with the
// longest lease and TTL (which moves its removal later) needs no new queue
// item; at + lease, compared with the old removal, once wrapped negative
// and pushed one.
func TestTakeoverOfLongClaimQueuesNoExtraItem(t *testing.T) {
	c := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := New(Options{Clock: c})
	ctx := context.Background()
	const long = store.MaxDuration
	if _, err := s.Claim(ctx, "k", store.ClaimRequest{Owner: "a", Lease: long, TTL: long}); err != nil {
		t.Fatal(err)
	}
	sh := s.shardOf("k")
	sh.mu.Lock()
	_, before := sh.held()
	sh.mu.Unlock()
	got, err := s.Claim(ctx, "k", store.ClaimRequest{Owner: "b", Dead: "a", Lease: long, TTL: long})
	if err != nil || !got.Takeover {
		t.Fatalf("takeover: %+v, %v", got, err)
	}
	sh.mu.Lock()
	_, after := sh.held()
	sh.mu.Unlock()
	if after != before {
		t.Fatalf("a takeover that moves the removal later queued %d items, want none", after-before)
	}
}

// steppedClock is the real clock with its wall reading moved by step, its
// monotonic reading left alone: what an NTP step does to time.Now.
type steppedClock struct {
	clock.Clock
	step time.Duration
}

func (c *steppedClock) Now() time.Time {
	t := time.Now()
	// A time.Time with a monotonic reading keeps its wall seconds (since
	// 1885) in bits 30 to 62 of its first word.
	w := (*uint64)(unsafe.Pointer(&t))
	if *w&(1<<63) == 0 {
		panic("time.Now has no monotonic reading")
	}
	*w += uint64(c.step/time.Second) << 30
	return t
}

// TestCreatedAtFollowsWallClockStep: a result's CreatedAt and ExpiresAt are
// read on the wall clock of when they are returned, as they were when the
// record kept time.Time values: a step of the wall clock after the store
// was made (an NTP correction soon after boot) does not offset them. Ticks
// follow the monotonic reading, so the wall reading of the store's epoch
// plus a tick is off by every step since the store was made.
func TestCreatedAtFollowsWallClockStep(t *testing.T) {
	c := &steppedClock{Clock: clock.Real()}
	s := New(Options{Clock: c})
	ctx := context.Background()
	c.step = time.Hour
	a, err := s.Claim(ctx, "k", store.ClaimRequest{Owner: "a", Lease: time.Minute, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.Complete(ctx, "k", a.Token, store.Record{Value: []byte("v")}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now := c.Now().Round(0)
	if d := now.Sub(rec.CreatedAt.Round(0)); d < 0 || d > time.Minute {
		t.Errorf("CreatedAt %v on the wall clock, now %v", rec.CreatedAt.Round(0), now)
	}
	if d := rec.ExpiresAt.Round(0).Sub(now); d < 59*time.Minute || d > time.Hour {
		t.Errorf("ExpiresAt %v on the wall clock, now %v: want an hour later", rec.ExpiresAt.Round(0), now)
	}
	got, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if !got.CreatedAt.Equal(rec.CreatedAt) || !got.ExpiresAt.Equal(rec.ExpiresAt) {
		t.Errorf("Get: created %v, expires %v; Complete returned %v, %v", got.CreatedAt, got.ExpiresAt, rec.CreatedAt, rec.ExpiresAt)
	}
}

// TestResultTimesEqualFakeClock: with a fake clock, the times a result
// carries are those of the clock when it was stored, whatever the clock
// reads when it is returned.
func TestResultTimesEqualFakeClock(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := clock.NewFake(start)
	s := New(Options{Clock: c})
	ctx := context.Background()
	c.Advance(time.Hour + 7)
	a, err := s.Claim(ctx, "k", store.ClaimRequest{Owner: "a", Lease: time.Minute, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	at := c.Now()
	const ttl = 90 * 24 * time.Hour
	rec, err := s.Complete(ctx, "k", a.Token, store.Record{Value: []byte("v")}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(ttl / 2)
	got, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []store.Record{rec, got} {
		if !r.CreatedAt.Equal(at) || !r.ExpiresAt.Equal(at.Add(ttl)) {
			t.Errorf("created %v, expires %v; want %v, %v", r.CreatedAt, r.ExpiresAt, at, at.Add(ttl))
		}
	}
}
