package actors

// Regression tests from the second review of direct owners (direct.go):
// each comment says what went wrong before the fix, and each test failed
// then.

import (
	"context"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

// A store invalidation of a key whose direct owner is announced but not
// yet adopted (its request behind the invalidation in the mailbox) finds
// no entry to mark noCache; the entry adopt creates next caches the
// owner's result, which the store deleted: the LRU replays a deleted
// result until its TTL. (On the shard's path the owner's entry exists, and
// onInvalidate marks it noCache.)
func TestInvalidationBeforeAdoptionCachesNothing(t *testing.T) {
	w := newDirectWorld(t)
	s := w.set.shards[0]
	r := w.send("k")
	grant := w.reply(r)
	if grant.Kind != Grant {
		t.Fatalf("reply %+v", grant)
	}
	// The owner stores its result (completeHere, first half).
	rec, err := w.mem.Complete(context.Background(), "k", grant.Token, store.Record{Value: []byte(`"v"`)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	release := blockShard(t, s)
	// Another instance forgets the key: the store deletes it and publishes
	// the invalidation (posted to the shard).
	if err := w.mem.Forget(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	// The promotion timer announces the owner (posted after).
	w.clk.Advance(promoteAfter)
	eventually(t, "the announcement", func() bool { return r.dstate.Load() == dAnnounced })
	// Its Finish (completeHere, second half).
	f := &r.Finish
	f.Req, f.Kind, f.Value, f.Record, f.Stored = r, Success, "v", rec, true
	f.Own = Cached{Record: rec, Value: "v"}
	f.Result = &f.Own
	w.set.Finish(f)
	release()
	eventually(t, "the Finish handled", func() bool { return s.nEntries.Load() == 0 && w.inFlight() == 0 })
	var c Cached
	if w.set.Hit("k", w.clk.Now(), &c) {
		t.Fatalf("the LRU holds a result the store deleted: %+v (store claim now: %v)", c, w.claimBy("other", "k").Status)
	}
}

// Control: the same on the shard's path keeps the deleted result out.
func TestInvalidationOnTheShardPathCachesNothing(t *testing.T) {
	w := newDirectWorld(t)
	s := w.set.shards[0]
	r := w.send("k", func(r *Request) { r.Direct = false })
	grant := w.reply(r)
	rec, err := w.mem.Complete(context.Background(), "k", grant.Token, store.Record{Value: []byte(`"v"`)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	release := blockShard(t, s)
	if err := w.mem.Forget(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	f := &r.Finish
	f.Req, f.Kind, f.Value, f.Record, f.Stored = r, Success, "v", rec, true
	f.Own = Cached{Record: rec, Value: "v"}
	f.Result = &f.Own
	w.set.Finish(f)
	release()
	eventually(t, "the Finish handled", func() bool { return s.nEntries.Load() == 0 })
	var c Cached
	if w.set.Hit("k", w.clk.Now(), &c) {
		t.Fatalf("shard path cached a deleted result: %+v", c)
	}
}
