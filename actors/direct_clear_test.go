package actors

// Regression tests from the second review of direct owners (direct.go):
// each comment says what went wrong before the fix, and each test failed
// then.

import (
	"context"
	"testing"
	"time"
)

// blockShard holds the shard's goroutine inside a Forget's answer (an
// unbuffered reply) until the returned function is called.
func blockShard(t *testing.T, s *shard) (release func()) {
	m := &forget{key: "block", reply: make(chan error)}
	s.send(m)
	return func() {
		select {
		case <-m.reply:
		case <-time.After(10 * time.Second):
			t.Fatal("shard never answered the blocking forget")
		}
	}
}

// Clear must treat a key as busy while a run of it is in flight here (the
// fix of f6eda1f: "a listed owner's key is busy"). A direct owner the
// promotion timer announced is off the list, and its request waits in the
// mailbox behind a page part Clear posted before: onClear finds neither an
// entry nor a listed owner, and allows the key; the run then stores its
// result and Clear's delete removes it.
func TestClearSeesAnAnnouncedOwner(t *testing.T) {
	w := newDirectWorld(t)
	s := w.set.shards[0]
	r := w.send("k")
	grant := w.reply(r)
	if grant.Kind != Grant {
		t.Fatalf("reply %+v", grant)
	}
	release := blockShard(t, s)
	page := w.set.beginClear([]string{"k"}) // clearMsg posted first
	w.clk.Advance(promoteAfter)             // the promotion timer announces r (posted after)
	eventually(t, "the announcement", func() bool { return r.dstate.Load() == dAnnounced })
	release()
	busy, err := page.wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The run stores its result; Clear's delete (del) follows for a key
	// allowed.
	w.complete(r, grant, "v")
	if !busy[0] {
		if err := w.mem.Forget(context.Background(), "k"); err != nil {
			t.Fatal(err)
		}
	}
	page.end()
	if !busy[0] {
		res := w.claimBy("other", "k")
		t.Fatalf("Clear allowed the key of a run in flight (its owner announced, not yet adopted): its result was deleted (a new claim: %v)", res.Status)
	}
}
