package actors

// Direct owners (direct.go): a regression test from the review of the
// first version (the comment says what went wrong then).

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

type ownerValue struct{ n int }

// A caller of a key whose run is in flight in this process gets the
// owner's value itself (Joined), as when the shard parks it behind the
// owner. heldByDirect gives it that when the direct owner has stored its
// result but not yet reached finishHere (it announces the owner and the
// caller waits for its Finish). But once finishHere has set dDone, and
// before cacheDirect has put the result in the LRU, the caller's claim
// finds the key completed, heldByDirect passes the owner by (dDone), and
// the caller is answered with the store's record: no value of the owner's
// (a copy decoded from the stored bytes), Replayed rather than Joined.
//
// The owner's goroutine is held between its CAS to dDone and its unlink by
// holding the list's lock (as a preemption there would).
func TestCallerAfterADirectRunGetsTheOwnersValue(t *testing.T) {
	ctx := context.Background()
	ms := memstore.New(memstore.Options{})
	set, err := NewSet(ctx, 1, Config{Store: ms, Clock: clock.Real(), Logger: slog.New(slog.DiscardHandler), CacheEntries: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close(ctx)
	a := NewRequest()
	a.Key, a.Lease, a.TTL, a.Settle, a.Direct = "k", time.Minute, time.Hour, forever, true
	if err := set.Send(a); err != nil {
		t.Fatal(err)
	}
	grant := <-a.Reply
	if grant.Kind != Grant || a.dstate.Load() != dRunning {
		t.Fatalf("A: %+v, dstate %d: want a direct owner", grant, a.dstate.Load())
	}
	// A's run ends well: it completes the key itself (owner.completeHere).
	val := &ownerValue{n: 7}
	rec, err := ms.Complete(ctx, "k", grant.Token, store.Record{Value: []byte(`{}`)}, a.TTL)
	if err != nil {
		t.Fatal(err)
	}
	f := &a.Finish
	f.Req, f.Kind, f.Value, f.Stored = a, Success, val, true
	f.Own = Cached{Record: rec, Value: val}
	f.Result = &f.Own
	s := a.shard
	s.dir.mu.Lock()
	finished := make(chan struct{})
	go func() { set.Finish(f); close(finished) }()
	for a.dstate.Load() != dDone {
		time.Sleep(time.Millisecond)
	}
	b := NewRequest()
	b.Key, b.Lease, b.TTL, b.Settle, b.Direct = "k", time.Minute, time.Hour, forever, true
	if err := set.Send(b); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the shard claims for B, and waits for the lock in heldByDirect
	s.dir.mu.Unlock()
	<-finished
	rep := <-b.Reply
	// A's run was over before B called (its result stored and cached):
	// B replays it, with the owner's value itself, never the store's copy.
	if rep.Kind != Settled || rep.Result == nil || rep.Result.Value != any(val) {
		var v any
		if rep.Result != nil {
			v = rep.Result.Value
		}
		t.Fatalf("B, a caller of a key whose run was in flight: kind %d, joined %v, value %v; want the owner's value itself (%p)",
			rep.Kind, rep.Joined, v, val)
	}
}
