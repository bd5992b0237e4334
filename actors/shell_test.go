package actors

// Tests of the shell (shell.go): messages become events for the right key,
// and effects are performed in order. The transition function itself is
// tested in step_test.go.

import (
	"errors"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

// With an in-process store, a new key is granted within the message that
// asked for it: the claim's answer is handled as the next event of the
// same message, never inside the step that sent it.
func TestInlineStoreGrantsWithinTheRequest(t *testing.T) {
	h := newHarness(t, inline)
	r := h.ask("k")
	h.s.drainInline()
	if rep := h.reply(r); rep.Kind != Grant {
		t.Fatalf("reply = %s, want a Grant", fmtReply(rep))
	}
	h.wantPhase("k", phRunning)
}

// A wake-up for every key ("": wake-ups may have been lost) re-claims every
// key held elsewhere.
func TestWakeForAllKeysReclaimsEveryRemoteKey(t *testing.T) {
	h := newHarness(t, waker)
	held := func() {
		for _, o := range h.batch {
			o.Result = store.ClaimResult{Status: store.InProgress, LeaseLeft: time.Minute}
		}
		h.deliver()
	}
	a := h.ask("a")
	held()
	b := h.ask("b")
	held()
	h.wantPhase("a", phRemote)
	h.wantPhase("b", phRemote)
	h.s.onWake("")
	h.wantPhase("a", phClaiming)
	h.wantPhase("b", phClaiming)
	h.noReply(a, b)
}

// A settled answer fills the LRU before the callers hear of it: a caller
// woken by it that calls again finds the result without an actor hop.
func TestResultIsCachedBeforeTheAnswer(t *testing.T) {
	h := newHarness(t, withCache)
	r := h.ask("k")
	h.grant(r)
	h.finish(r, Success, nil)
	h.op(store.OpComplete)
	h.runStore()
	h.deliver()
	if h.s.lookup("k", h.clk.Now()) == nil {
		t.Fatal("not cached")
	}
	h.want(r, Reply{Kind: Settled})
}

// A panic recovered while an in-process answer is handled (a bug) costs
// that answer only: the answers queued behind it are handled with the next
// message, and the queue does not panic for ever after.
func TestDrainInlineGoesOnAfterAPanic(t *testing.T) {
	h := newHarness(t, inline)
	r := h.ask("k") // its claim's answer is queued
	h.s.inlineDone = append([]*op{nil}, h.s.inlineDone...)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("handling a nil op did not panic")
			}
		}()
		h.s.drainInline()
	}()
	h.s.drainInline()
	if rep := h.reply(r); rep.Kind != Grant {
		t.Fatalf("reply = %s, want a Grant", fmtReply(rep))
	}
}

// Forget is refused while the key has callers in flight here (its state
// would outlive the deleted record), and goes to the store otherwise,
// dropping the key from the LRU first.
func TestForgetRefusedWhileTheKeyIsInFlight(t *testing.T) {
	h := newHarness(t, withCache)
	h.runToCache("done")
	r := h.ask("busy") // its claim is out
	busy := &forget{key: "busy", reply: make(chan error, 1)}
	h.s.onForget(busy)
	if err := <-busy.reply; !errors.Is(err, store.ErrInProgress) {
		t.Fatalf("Forget of a key in flight = %v, want ErrInProgress", err)
	}
	h.grant(r)
	done := &forget{key: "done", reply: make(chan error, 1)}
	h.s.onForget(done)
	if h.s.lookup("done", h.clk.Now()) != nil {
		t.Fatal("the forgotten key is still cached")
	}
	h.op(store.OpForget)
	h.run()
	if err := <-done.reply; err != nil {
		t.Fatalf("Forget = %v", err)
	}
}

// A Grant carries the store's attempt and takeover flag: 1 for the claim
// that creates the key's record; 2 for the caller that takes the key over
// once a hard lease ended without a result; 1 again after that owner
// released the key (a new record), with a larger fence each time.
func TestGrantCarriesTheStoresAttempt(t *testing.T) {
	h := newHarness(t)
	first := h.ask("k", lease(time.Second), noRenew)
	h.op(store.OpClaim)
	h.run()
	rep := h.reply(first)
	if rep.Kind != Grant || rep.Attempt != 1 || rep.Takeover {
		t.Fatalf("first grant = %s attempt %d takeover %v, want attempt 1", fmtReply(rep), rep.Attempt, rep.Takeover)
	}
	next := h.ask("k")
	h.advance(time.Second) // the hard lease ends: the key goes to the next caller
	h.op(store.OpClaim)
	h.run()
	took := h.reply(next)
	if took.Kind != Grant || took.Attempt != 2 || !took.Takeover || took.Token.Fence <= rep.Token.Fence {
		t.Fatalf("takeover grant = %s attempt %d takeover %v, want attempt 2, a takeover, a larger fence",
			fmtReply(took), took.Attempt, took.Takeover)
	}
	h.finish(first, Success, nil) // the late owner's result is refused
	h.reply(first)
	again := h.ask("k")
	h.finish(next, Transient, errors.New("boom"))
	h.op(store.OpRelease)
	h.run()
	h.reply(next)
	h.op(store.OpClaim)
	h.run()
	last := h.reply(again)
	if last.Kind != Grant || last.Attempt != 1 || last.Takeover || last.Token.Fence <= took.Token.Fence {
		t.Fatalf("grant after the release = %s attempt %d takeover %v, want attempt 1, a larger fence",
			fmtReply(last), last.Attempt, last.Takeover)
	}
}
