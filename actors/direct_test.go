package actors

// Direct owners (direct.go) through a real Set over memstore: what the
// shard must do for an owner it never saw granted.

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
	"unsafe"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

type directWorld struct {
	t   *testing.T
	clk *clock.Fake
	mem *memstore.Store
	set *Set
}

func newDirectWorld(t *testing.T) *directWorld {
	t.Helper()
	w := &directWorld{t: t, clk: clock.NewFake(t0)}
	w.mem = memstore.New(memstore.Options{Clock: w.clk})
	set, err := NewSet(context.Background(), 1, Config{Store: w.mem, Clock: w.clk, Logger: slog.New(slog.DiscardHandler), CacheEntries: 16})
	if err != nil {
		t.Fatal(err)
	}
	w.set = set
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = set.Close(ctx)
		w.mem.Close()
	})
	return w
}

// send sends a request of key that may claim it itself.
func (w *directWorld) send(key string, mods ...func(*Request)) *Request {
	w.t.Helper()
	r := NewRequest()
	r.Key, r.Lease, r.TTL, r.Settle, r.Direct = key, 10*time.Second, time.Hour, forever, true
	for _, m := range mods {
		m(r)
	}
	if err := w.set.Send(r); err != nil {
		w.t.Fatal(err)
	}
	return r
}

func (w *directWorld) reply(r *Request) Reply {
	w.t.Helper()
	select {
	case rep := <-r.Reply:
		return rep
	case <-time.After(10 * time.Second):
		w.t.Fatalf("no reply for %s", r.Key)
		return Reply{}
	}
}

// claimBy claims key in the store as another instance would.
func (w *directWorld) claimBy(owner, key string) store.ClaimResult {
	w.t.Helper()
	res, err := w.mem.Claim(context.Background(), key, store.ClaimRequest{Owner: owner, Lease: time.Second, TTL: time.Hour})
	if err != nil {
		w.t.Fatal(err)
	}
	return res
}

// complete stores r's result as its owner does, and sends its Finish.
func (w *directWorld) complete(r *Request, grant Reply, v string) {
	w.t.Helper()
	rec, err := w.mem.Complete(context.Background(), r.Key, grant.Token, store.Record{Value: []byte(`"` + v + `"`)}, time.Hour)
	if err != nil {
		w.t.Fatal(err)
	}
	f := &r.Finish
	f.Req, f.Kind, f.Value, f.Record, f.Stored = r, Success, v, rec, true
	f.Own = Cached{Record: rec, Value: v}
	f.Result = &f.Own
	w.set.Finish(f)
}

// inFlight sums the set's InFlight counts.
func (w *directWorld) inFlight() int {
	n := 0
	w.set.Stats(func(_ int, st Stats) { n += st.InFlight })
	return n
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// A direct owner is granted before Send returns, and its result, once
// stored, is in the LRU with the owner's value itself; the shard never had
// an entry for the key.
func TestDirectOwnerNeedsNoShard(t *testing.T) {
	w := newDirectWorld(t)
	r := w.send("k")
	grant := w.reply(r)
	if grant.Kind != Grant || grant.Attempt != 1 || grant.Token.Fence == 0 {
		t.Fatalf("first reply %+v, want a Grant with the store's claim", grant)
	}
	if res := w.claimBy("other", "k"); res.Status != store.InProgress {
		t.Fatalf("the key is %v in the store, want in progress", res.Status)
	}
	if n := w.inFlight(); n != 1 {
		t.Fatalf("InFlight %d while the owner runs, want 1", n)
	}
	w.complete(r, grant, "v")
	var c Cached
	if !w.set.Hit("k", w.clk.Now(), &c) || c.Value != "v" {
		t.Fatalf("LRU: %+v, want the owner's value", c)
	}
	if n := w.set.shards[0].nEntries.Load(); n != 0 {
		t.Fatalf("the shard has %d entries, want none", n)
	}
	if n := w.inFlight(); n != 0 {
		t.Fatalf("InFlight %d after the run, want 0", n)
	}
}

// A duplicate that reaches the shard while a direct owner runs is parked
// behind it and gets its value itself once it finishes.
func TestDuplicateParksBehindDirectOwner(t *testing.T) {
	w := newDirectWorld(t)
	r := w.send("k", fp("a"))
	grant := w.reply(r)
	dup := w.send("k", fp("a")) // its slot is busy: straight to the shard
	eventually(t, "the duplicate parked", func() bool { return w.set.shards[0].nWaiters.Load() == 1 })
	other := w.send("k", fp("b"))
	if rep := w.reply(other); rep.Kind != FailMismatch {
		t.Fatalf("another fingerprint: %+v, want FailMismatch", rep)
	}
	w.complete(r, grant, "v")
	rep := w.reply(dup)
	if rep.Kind != Settled || !rep.Joined || rep.Result.Value != "v" {
		t.Fatalf("duplicate: %+v, want the owner's value, joined", rep)
	}
}

// A direct owner's caller that leaves as it is granted the key (its
// context ended) has the shard release the key.
func TestDirectOwnerThatLeavesReleasesTheKey(t *testing.T) {
	w := newDirectWorld(t)
	r := w.send("k")
	if rep := w.reply(r); rep.Kind != Grant {
		t.Fatalf("reply %+v", rep)
	}
	w.set.Abandon(r)
	eventually(t, "the key released", func() bool {
		res := w.claimBy("other", "k")
		if res.Status == store.Claimed {
			if res.Takeover {
				t.Fatal("the key was taken over, not released")
			}
			return true
		}
		return false
	})
}

// Close stops a direct owner's run and waits for its Finish.
func TestCloseStopsDirectOwner(t *testing.T) {
	w := newDirectWorld(t)
	r := w.send("k")
	grant := w.reply(r)
	causes := make(chan error, 1)
	r.SetCanceler(cancelFunc(func(cause error) { causes <- cause }))
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		closed <- w.set.Close(ctx)
	}()
	select {
	case cause := <-causes:
		if !errors.Is(cause, store.ErrClosed) {
			t.Fatalf("run stopped with %v, want the runtime closing", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not stop the direct owner's run")
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) before the owner finished", err)
	case <-time.After(20 * time.Millisecond):
	}
	w.complete(r, grant, "v")
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if res := w.claimBy("other", "k"); res.Status != store.Completed {
		t.Fatalf("after Close the key is %v, want its result kept", res.Status)
	}
}

// A Forget of its key is refused while a direct owner runs (its key is
// busy, as with any owner), and a drop of the LRU since its claim keeps its
// result out of the LRU: the store may have deleted it after the owner
// stored it.
func TestDirectOwnerSkipsTheLRUAfterADrop(t *testing.T) {
	w := newDirectWorld(t)
	r := w.send("k")
	grant := w.reply(r)
	if err := w.set.Forget(context.Background(), "k"); !errors.Is(err, store.ErrInProgress) {
		t.Fatalf("Forget of a key a direct owner runs: %v, want ErrInProgress", err)
	}
	// A drop of every key's LRU entry (as Runtime.Clear of a scope does)
	// while the owner runs: what it stores next may be deleted already.
	if err := w.set.DropCached(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	w.complete(r, grant, "v")
	var c Cached
	if w.set.Hit("k", w.clk.Now(), &c) {
		t.Fatal("a result stored after a drop began was cached")
	}
	// The next owner of another key caches as usual.
	r2 := w.send("k2")
	w.complete(r2, w.reply(r2), "v2")
	if !w.set.Hit("k2", w.clk.Now(), &c) {
		t.Fatal("a direct owner's result was not cached")
	}
}

// A call whose lease is shorter than minDirectLease, or a request that is
// not Direct, takes the shard's path.
func TestShortLeaseTakesTheShardsPath(t *testing.T) {
	w := newDirectWorld(t)
	r := w.send("k", lease(minDirectLease/2))
	grant := w.reply(r)
	if grant.Kind != Grant {
		t.Fatalf("reply %+v", grant)
	}
	defer w.complete(r, grant, "v")
	if r.pre || r.dstate.Load() != 0 {
		t.Fatal("a short lease was claimed on the caller's goroutine")
	}
	if n := w.set.shards[0].nEntries.Load(); n != 1 {
		t.Fatalf("the shard has %d entries, want the owner's", n)
	}
}

// A storm's thousand callers each take a Request (pooled, but a storm needs
// many at once): the fields of direct owners fit in the 640-byte size
// class, one above the 576 bytes before them.
func TestRequestSize(t *testing.T) {
	if n := unsafe.Sizeof(Request{}); n > 640 {
		t.Fatalf("a Request takes %d bytes, over the 640-byte size class", n)
	}
}
