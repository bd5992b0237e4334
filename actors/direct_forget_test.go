package actors

// Regression tests from the second review of direct owners (direct.go):
// each comment says what went wrong before the fix, and each test failed
// then.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

// Forget answers store.ErrInProgress while the key has callers in flight
// here: on the shard's path an owner that stored its result keeps its
// entry until its Finish is handled. A direct owner has no entry and
// onForget does not look at the list (onClear does: hasDirect): a Forget
// between the owner's Complete and its Finish deletes the result of a run
// still in flight.
func TestForgetSeesADirectOwner(t *testing.T) {
	w := newDirectWorld(t)
	r := w.send("k")
	grant := w.reply(r)
	if grant.Kind != Grant {
		t.Fatalf("reply %+v", grant)
	}
	// The owner's completeHere: the store first...
	rec, err := w.mem.Complete(context.Background(), "k", grant.Token, store.Record{Value: []byte(`"v"`)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ferr := w.set.Forget(context.Background(), "k")
	// ... then its Finish.
	f := &r.Finish
	f.Req, f.Kind, f.Value, f.Record, f.Stored = r, Success, "v", rec, true
	f.Own = Cached{Record: rec, Value: "v"}
	f.Result = &f.Own
	w.set.Finish(f)
	if !errors.Is(ferr, store.ErrInProgress) {
		t.Fatalf("Forget during a direct owner's run: %v, want ErrInProgress (the key now: %v)", ferr, w.claimBy("other", "k").Status)
	}
}

// Control: the same on the shard's path answers ErrInProgress.
func TestForgetOnTheShardPathSeesTheOwner(t *testing.T) {
	w := newDirectWorld(t)
	r := w.send("k", func(r *Request) { r.Direct = false })
	grant := w.reply(r)
	rec, err := w.mem.Complete(context.Background(), "k", grant.Token, store.Record{Value: []byte(`"v"`)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ferr := w.set.Forget(context.Background(), "k")
	f := &r.Finish
	f.Req, f.Kind, f.Value, f.Record, f.Stored = r, Success, "v", rec, true
	f.Own = Cached{Record: rec, Value: "v"}
	f.Result = &f.Own
	w.set.Finish(f)
	if !errors.Is(ferr, store.ErrInProgress) {
		t.Fatalf("shard path: %v", ferr)
	}
}
