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

// A shard claim that finds the key completed while the LRU holds that very
// result (handle's ev.own) caches it again through remember, with the new
// entry's ownCodec (false). A result an owner made with its own codec is
// kept in the LRU with both its value and its encoding (Cached.one(true));
// re-remembered with ownCodec false, its encoding is dropped, and a caller
// of another type then gets the value encoded with JSON and decoded with
// its own codec.
func TestFoundResultKeepsOwnCodecBytes(t *testing.T) {
	w := newWorld(t)
	r := w.arrive(req())
	rec := w.stored().Record
	rec.Value = []byte("owncodec-bytes")
	// As cacheDirect keeps a result made with the caller's own codec.
	own := &Cached{Record: rec, Value: "the owner's"}
	oe := w.take(store.OpClaim)
	o := &store.Op{Kind: store.OpClaim, Key: "k", Claim: store.ClaimRequest{Lease: oe.lease, TTL: oe.ttl},
		Result: store.ClaimResult{Status: store.Completed, Record: rec}}
	w.step(event{kind: evClaimed, op: o, sent: w.sent, own: own})
	w.wantReply(r, Settled)
	if len(w.cached) == 0 {
		t.Fatal("nothing cached")
	}
	if c := w.cached[len(w.cached)-1]; c.Value != nil && c.Record.Value == nil {
		t.Fatalf("the LRU's copy lost the owner's own-codec encoding: %+v", c)
	}
}

// The same through a real set: a caller parked behind the key's holder
// (phRemote: the shard's claim found it in progress, e.g. a direct owner
// still dClaiming, see heldByDirect) is woken when the holder stores its
// result; the holder, a direct owner with its own codec, cached its result
// (value and encoding, Cached.one(true)) before the shard's re-claim ran.
// The re-claim finds that copy (ev.own) and caches it again without the
// encoding.
func TestReclaimKeepsOwnCodecBytes(t *testing.T) {
	w := newDirectWorld(t)
	s := w.set.shards[0]
	res := w.claimBy("holder", "k") // the holder's claim
	c := w.send("k", func(r *Request) { r.Direct = false })
	eventually(t, "the caller parked", func() bool { return s.nWaiters.Load() == 1 })
	release := blockShard(t, s)
	rec, err := w.mem.Complete(context.Background(), "k", res.Token, store.Record{Value: []byte("own-codec-bytes")}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// The holder's cacheDirect with OwnCodec (a codec other than JSON).
	own := Cached{Record: rec, Value: "the owner's"}
	own.Size = own.size()
	s.cacheAdd("k", own.one(true))
	release()
	rep := w.reply(c)
	if rep.Kind != Settled {
		t.Fatalf("reply %+v", rep)
	}
	var got Cached
	if !w.set.Hit("k", w.clk.Now(), &got) {
		t.Fatal("no LRU copy")
	}
	if got.Value != nil && got.Record.Value == nil {
		t.Fatalf("the LRU's copy lost the owner's own-codec encoding after the re-claim: %+v", got)
	}
}
