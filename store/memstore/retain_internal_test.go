package memstore

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"
	"weak"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
)

// TestExpiredResultNotRetainedByStaleItem completes a claim of a long TTL
// with a short one: the record then has two queue items, and the one that
// removes it leaves the other, due a day later. That item must not keep
// the removed record's value alive for that day.
func TestExpiredResultNotRetainedByStaleItem(t *testing.T) {
	ctx := context.Background()
	c := clock.NewFake(time.Unix(1_700_000_000, 0))
	s := New(Options{Clock: c})
	res, err := s.Claim(ctx, "k", store.ClaimRequest{Owner: "o", Lease: time.Second, TTL: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(ctx, "k", res.Token, store.Record{Value: make([]byte, 1<<20)}, time.Minute); err != nil {
		t.Fatal(err)
	}
	sh := s.shardOf("k")
	sh.mu.Lock()
	ref := weak.Make(&sh.records["k"].value[0])
	sh.mu.Unlock()
	runtime.GC()
	if ref.Value() == nil {
		t.Fatal("the weak pointer does not follow the value")
	}
	c.Advance(2 * time.Minute)
	for i := range 100 { // sweeps the queue of the short TTL
		s.Get(ctx, "other"+strconv.Itoa(i))
	}
	if records, queued := s.Held(); records != 0 || queued != 1 {
		t.Fatalf("%d records, %d queue items held after the TTL", records, queued)
	}
	runtime.GC()
	runtime.GC()
	if ref.Value() != nil {
		t.Fatal("an expired record's value is still reachable (from its other queue item)")
	}
	runtime.KeepAlive(s)
}

// TestRecordSize keeps a record, which the store holds for every key for
// its whole TTL, in the 144-byte size class: its times are ticks, not
// time.Time values, and its waiters list is behind a pointer (see record).
func TestRecordSize(t *testing.T) {
	if got := unsafe.Sizeof(record{}); got > 144 {
		t.Fatalf("a record takes %d bytes, want at most 144", got)
	}
}
