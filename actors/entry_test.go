package actors

// White-box tests of the shard's per-key state machine: one Shard, driven
// on the test's goroutine with messages, store answers and a fake clock
// (see harness_test.go).

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

var (
	errDown      = errors.New("store unreachable")
	errTransient = errors.New("try again")
	errPanic     = errors.New("panic: boom")
)

func TestFirstRequestClaimsAndIsGranted(t *testing.T) {
	h := newHarness(t)
	r := h.ask("k", fp("fp-a"), lease(9*time.Second), ttl(2*time.Hour))

	h.wantPhase("k", phClaiming)
	h.wantCounts(1, 0)
	h.noReply(r)
	o := h.op(store.OpClaim)
	if c := o.Claim; c.Owner != "owner-1" || c.Lease != 9*time.Second || c.TTL != 2*time.Hour ||
		string(c.Fingerprint) != "fp-a" || c.Waiter != "" {
		t.Fatalf("claim = %+v, want owner-1, lease 9s, ttl 2h, fingerprint fp-a, no waiter", c)
	}

	h.run()
	tok := h.want(r, Reply{Kind: Grant, Token: store.Token{Fence: 1, Owner: "owner-1"}}).Token
	e := h.wantPhase("k", phRunning)
	if e.owner != r || r.where != owning || e.token != tok || string(e.fp) != "fp-a" || e.lease != 9*time.Second {
		t.Fatalf("entry after the grant: owner ok=%v where=%d token=%+v fp=%q lease=%v",
			e.owner == r, r.where, e.token, e.fp, e.lease)
	}
	if e.timer.kind != timerRenew || e.timer.idx < 0 || !e.timer.at.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("timer = kind %d idx %d at %v, want a renewal at a third of the lease", e.timer.kind, e.timer.idx, e.timer.at)
	}
	h.wantCounts(1, 0)
	h.noOp()

	h.finish(r, Success, nil)
	h.wantPhase("k", phFinishing)
	o = h.op(store.OpComplete)
	if o.Token != tok || string(o.Record.Value) != `"v"` || o.TTL != 2*time.Hour {
		t.Fatalf("complete = token %+v value %q ttl %v", o.Token, o.Record.Value, o.TTL)
	}
	h.run()
	rep := h.want(r, Reply{Kind: Settled})
	if rep.Result == nil || rep.Result.Value != "v" || string(rep.Result.Record.Value) != `"v"` || rep.Result.Record.Token != tok {
		t.Fatalf("owner's result = %s", fmtReply(rep))
	}
	h.idle()
}

func TestInlineStoreGrantsWithinTheRequest(t *testing.T) {
	h := newHarness(t, inline)
	r := h.ask("k")
	h.want(r, Reply{Kind: Grant, Token: store.Token{Fence: 1, Owner: "owner-1"}})
	h.wantPhase("k", phRunning)
	if h.s.nOps.Load() != 1 || h.s.nBatches.Load() != 1 {
		t.Fatalf("ops, batches = %d, %d; want 1, 1", h.s.nOps.Load(), h.s.nBatches.Load())
	}
	h.finish(r, Success, nil)
	h.want(r, Reply{Kind: Settled})
	h.idle()
}

func TestDuplicateParksAndJoinsTheOwnersResult(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k")
	r2 := h.ask("k") // while the claim is out
	h.wantPhase("k", phClaiming)
	h.wantCounts(1, 1)
	if r2.where != parked {
		t.Fatalf("second caller where = %d, want parked", r2.where)
	}
	h.op(store.OpClaim) // one claim for both callers
	if n := h.queued(); n != 0 {
		t.Fatalf("operations queued behind the claim = %d, want 0", n)
	}

	h.grant(r1)
	h.noReply(r2)
	r3 := h.ask("k") // while the owner runs
	h.wantCounts(1, 2)
	h.noReply(r3)

	h.finish(r1, Success, nil)
	h.run()
	own := h.want(r1, Reply{Kind: Settled})
	for _, r := range []*Request{r2, r3} {
		rep := h.want(r, Reply{Kind: Settled, Joined: true, Waited: true})
		if rep.Result != own.Result {
			t.Fatalf("a waiter's result %p is not the owner's %p", rep.Result, own.Result)
		}
	}
	h.idle()
}

func TestSettleZeroGetsConflictWithLeaseLeft(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k", lease(10*time.Second))
	early := h.ask("k", settle(0)) // parks while the claim is out
	h.wantCounts(1, 1)
	h.advance(500 * time.Millisecond) // the claim takes half a second
	h.grant(r1)
	// The lease counts from when the claim was sent.
	h.want(early, Reply{Kind: Failed, Code: FailConflict, LeaseLeft: 9500 * time.Millisecond, Waited: true})
	h.wantCounts(1, 0)

	r2 := h.ask("k", settle(0))
	h.want(r2, Reply{Kind: Failed, Code: FailConflict, LeaseLeft: 9500 * time.Millisecond})
	h.advance(2 * time.Second)
	r3 := h.ask("k", settle(0))
	h.want(r3, Reply{Kind: Failed, Code: FailConflict, LeaseLeft: 7500 * time.Millisecond})
	h.wantPhase("k", phRunning)
	h.wantCounts(1, 0)
	h.noReply(r1)
}

func TestMismatchingFingerprintFails(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k", fp("a"))
	early := h.ask("k", fp("b")) // parks: the candidate is not the holder yet
	h.wantCounts(1, 1)
	h.grant(r1)
	h.want(early, Reply{Kind: Failed, Code: FailMismatch, Waited: true})

	late := h.ask("k", fp("b"))
	h.want(late, Reply{Kind: Failed, Code: FailMismatch})
	none := h.ask("k") // no fingerprint: nothing to compare
	same := h.ask("k", fp("a"))
	h.noReply(none, same)
	h.wantCounts(1, 2)

	h.finish(r1, Success, nil)
	h.run()
	h.want(r1, Reply{Kind: Settled})
	h.want(none, Reply{Kind: Settled, Joined: true, Waited: true})
	h.want(same, Reply{Kind: Settled, Joined: true, Waited: true})
	h.idle()
}

func TestSettleDeadlineAnswersConflict(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k", lease(30*time.Second))
	h.grant(r1)
	r2 := h.ask("k", settle(100*time.Millisecond))
	r3 := h.ask("k", settle(300*time.Millisecond))
	e := h.entry("k")
	if !e.settleTimer.at.Equal(t0.Add(100 * time.Millisecond)) {
		t.Fatalf("settle timer at %v, want the earliest deadline", e.settleTimer.at.Sub(t0))
	}

	h.advance(99 * time.Millisecond)
	h.noReply(r2, r3)
	h.advance(time.Millisecond)
	h.want(r2, Reply{Kind: Failed, Code: FailConflict, LeaseLeft: 29900 * time.Millisecond, Waited: true})
	h.noReply(r3)
	h.wantCounts(1, 1)
	if !e.settleTimer.at.Equal(t0.Add(300 * time.Millisecond)) {
		t.Fatalf("settle timer at %v, want the next deadline", e.settleTimer.at.Sub(t0))
	}

	h.advance(200 * time.Millisecond)
	h.want(r3, Reply{Kind: Failed, Code: FailConflict, LeaseLeft: 29700 * time.Millisecond, Waited: true})
	h.wantCounts(1, 0)
	h.wantPhase("k", phRunning)
	h.noReply(r1)
	if e.settleTimer.idx >= 0 || e.timer.kind != timerRenew || e.timer.idx < 0 {
		t.Fatalf("timers after the deadlines: settle idx %d, timer kind %d idx %d", e.settleTimer.idx, e.timer.kind, e.timer.idx)
	}
}

func TestTransientFinishReleasesAndFirstWaiterClaimsAfresh(t *testing.T) {
	h := newHarness(t)
	// The first owner has no fingerprint and a hard 5s lease.
	r1 := h.ask("k", lease(5*time.Second), noRenew)
	tok1 := h.grant(r1)
	r2 := h.ask("k", fp("b"), lease(20*time.Second), ttl(2*time.Hour))
	r3 := h.ask("k", fp("c"))
	h.wantCounts(1, 2)

	h.finish(r1, Transient, errTransient)
	e := h.wantPhase("k", phReleasing)
	if o := h.op(store.OpRelease); o.Token != tok1 {
		t.Fatalf("release token = %+v, want the owner's %+v", o.Token, tok1)
	}
	h.noReply(r1) // answered once the store has released the key
	h.run()
	h.want(r1, Reply{Kind: Failed, Code: FailOwner, Err: errTransient})

	// The first waiter claims the key with its own lease, TTL and fingerprint.
	h.wantPhase("k", phClaiming)
	h.wantCounts(1, 1)
	if e.owner != r2 || r2.where != claiming {
		t.Fatalf("candidate is the first waiter = %v (where=%d)", e.owner == r2, r2.where)
	}
	o := h.op(store.OpClaim)
	if c := o.Claim; c.Owner != "owner-2" || c.Lease != 20*time.Second || c.TTL != 2*time.Hour || string(c.Fingerprint) != "b" {
		t.Fatalf("second claim = %+v, want owner-2 with the waiter's lease, ttl and fingerprint", c)
	}
	h.noReply(r2)
	h.run()
	tok2 := h.want(r2, Reply{Kind: Grant, Token: store.Token{Fence: 2, Owner: "owner-2"}, Waited: true}).Token
	if tok2 == tok1 {
		t.Fatal("the new owner got the old owner's token")
	}
	// Its fingerprint now holds the key: the waiter with another one fails.
	h.want(r3, Reply{Kind: Failed, Code: FailMismatch, Waited: true})
	if e.token != tok2 || e.lease != 20*time.Second || e.ttl != 2*time.Hour || string(e.fp) != "b" {
		t.Fatalf("entry of the new owner: token %+v lease %v ttl %v fp %q", e.token, e.lease, e.ttl, e.fp)
	}
	if e.timer.kind != timerRenew || !e.timer.at.Equal(t0.Add(20*time.Second/3)) {
		t.Fatalf("new owner's timer = kind %d at %v, want its own renewal", e.timer.kind, e.timer.at.Sub(t0))
	}
	h.wantCounts(1, 0)

	h.finish(r2, Success, nil)
	h.run()
	h.want(r2, Reply{Kind: Settled, Waited: true})
	h.idle()
}

func TestPanicAnswersEveryoneAndReleases(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k")
	tok := h.grant(r1)
	r2, r3 := h.ask("k"), h.ask("k")

	h.finish(r1, Panic, errPanic)
	// The waiters get the panic at once; the owner once the key is released.
	h.want(r2, Reply{Kind: Failed, Code: FailOwner, Err: errPanic, Waited: true})
	h.want(r3, Reply{Kind: Failed, Code: FailOwner, Err: errPanic, Waited: true})
	h.wantCounts(1, 0)
	h.wantPhase("k", phReleasing)
	if o := h.op(store.OpRelease); o.Token != tok {
		t.Fatalf("release token = %+v, want %+v", o.Token, tok)
	}
	h.noReply(r1)
	h.run()
	h.want(r1, Reply{Kind: Failed, Code: FailOwner, Err: errPanic})
	h.idle()
	if _, err := h.mem.Get(context.Background(), "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("store Get after the release: %v, want ErrNotFound", err)
	}
}

func TestNoRenewOwnerIsLetGoAtLeaseEndWhenSomeoneWaits(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k", lease(time.Second), noRenew)
	cause := watch(r1)
	h.grant(r1)
	e := h.entry("k")
	if e.timer.kind != timerLeaseEnd || !e.timer.at.Equal(t0.Add(time.Second)) {
		t.Fatalf("timer = kind %d at %v, want the lease end", e.timer.kind, e.timer.at.Sub(t0))
	}
	r2 := h.ask("k")

	h.advance(999 * time.Millisecond)
	h.wantPhase("k", phRunning)
	if cause() != nil {
		t.Fatal("owner stopped before its lease ended")
	}
	h.advance(time.Millisecond)
	if !errors.Is(cause(), store.ErrLeaseLost) || !r1.expired {
		t.Fatalf("owner at its lease end: cause %v expired %v, want ErrLeaseLost", cause(), r1.expired)
	}
	if h.logs.count(slog.LevelWarn) != 1 {
		t.Fatalf("warnings = %d, want 1 (a function outlived its lease)", h.logs.count(slog.LevelWarn))
	}
	h.wantPhase("k", phClaiming)
	h.wantCounts(1, 0)
	if e.owner != r2 {
		t.Fatal("the waiter is not the candidate")
	}
	h.grant(r2) // a takeover in the store: its lease has ended too

	// The first owner's result is refused.
	h.finish(r1, Success, nil)
	h.want(r1, Reply{Kind: Failed, Code: FailLeaseLost, Op: store.OpComplete, Err: store.ErrLeaseLost})
	h.noOp()
	if e.owner != r2 || e.phase != phRunning {
		t.Fatal("the late Finish disturbed the new owner")
	}
}

func TestNoRenewOwnerIsKeptAtLeaseEndWhenNobodyWaits(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k", lease(time.Second), noRenew)
	cause := watch(r1)
	tok := h.grant(r1)

	h.advance(2 * time.Second)
	e := h.wantPhase("k", phRunning)
	if e.owner != r1 || cause() != nil || r1.expired {
		t.Fatalf("owner let go with nobody waiting: owner ok=%v cause=%v expired=%v", e.owner == r1, cause(), r1.expired)
	}
	if len(h.s.timers) != 0 {
		t.Fatalf("timers = %d, want none once the lease end passed", len(h.s.timers))
	}
	h.noOp()

	// Its result is still offered to the store, which keeps it: nobody
	// took the key over.
	h.finish(r1, Success, nil)
	if o := h.op(store.OpComplete); o.Token != tok {
		t.Fatalf("complete token = %+v, want %+v", o.Token, tok)
	}
	h.run()
	h.want(r1, Reply{Kind: Settled})
	h.idle()
}

func TestNoRenewOwnerIsLetGoWhenACallerComesAfterItsLeaseEnd(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k", lease(time.Second), noRenew)
	cause := watch(r1)
	h.grant(r1)
	h.advance(2 * time.Second)

	// Even a caller that may not wait: the lease is over, the key is free.
	r2 := h.ask("k", settle(0))
	if !errors.Is(cause(), store.ErrLeaseLost) {
		t.Fatalf("owner cause = %v, want ErrLeaseLost", cause())
	}
	h.wantPhase("k", phClaiming)
	h.wantCounts(1, 0)
	h.grant(r2)
	h.finish(r1, Success, nil)
	h.want(r1, Reply{Kind: Failed, Code: FailLeaseLost, Op: store.OpComplete, Err: store.ErrLeaseLost})
}

func TestRenewalAnswerForAnEarlierOwnerIsIgnored(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k", lease(3*time.Second))
	tok1 := h.grant(r1)
	r2 := h.ask("k", lease(3*time.Second))

	h.advance(time.Second) // the renewal goes out
	if o := h.op(store.OpRenew); o.Token != tok1 || o.Lease != 3*time.Second {
		t.Fatalf("renew = token %+v lease %v", o.Token, o.Lease)
	}
	// The owner fails while its renewal is out; the release waits its turn.
	h.finish(r1, Transient, errTransient)
	if h.queued() != 1 {
		t.Fatalf("pending operations = %d, want the release", h.queued())
	}
	h.fail(store.ErrLeaseLost) // the renewal's answer, for a run already over
	e := h.wantPhase("k", phReleasing)
	if e.lost {
		t.Fatal("a renewal answer for a run that is over marked the lease lost")
	}
	h.op(store.OpRelease)
	h.run()
	h.want(r1, Reply{Kind: Failed, Code: FailOwner, Err: errTransient})
	cause2 := watch(r2)
	tok2 := h.grant(r2)
	timerAt, leaseAt := e.timer.at, e.leaseAt

	// Answers to renewals sent for the first owner arrive late.
	for _, err := range []error{store.ErrLeaseLost, nil, errDown} {
		h.advance(100 * time.Millisecond)
		o := h.s.newOp(e)
		o.Kind, o.Key, o.Token, o.Lease, o.sent, o.Err = store.OpRenew, "k", tok1, 3*time.Second, h.clk.Now(), err
		h.s.handle(o)
		if e.lost || cause2() != nil || e.token != tok2 || !e.leaseAt.Equal(leaseAt) || !e.timer.at.Equal(timerAt) {
			t.Fatalf("late renewal answer (err %v) for the first owner changed the second's run: "+
				"lost %v cause %v leaseAt %v timer %v", err, e.lost, cause2(), e.leaseAt.Sub(t0), e.timer.at.Sub(t0))
		}
	}
	h.noReply(r2)
	h.noOp()
}

func TestRenewalCountsTheLeaseFromWhenItWasSent(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k", lease(3*time.Second))
	h.grant(r1)
	h.advance(time.Second)
	h.op(store.OpRenew)
	h.advance(200 * time.Millisecond) // the store answers late
	h.run()
	e := h.entry("k")
	if !e.leaseAt.Equal(t0.Add(time.Second)) || !e.timer.at.Equal(t0.Add(2*time.Second)) || e.timer.kind != timerRenew {
		t.Fatalf("after a renewal: leaseAt %v, next renewal %v (kind %d); want 1s, 2s",
			e.leaseAt.Sub(t0), e.timer.at.Sub(t0), e.timer.kind)
	}
	r2 := h.ask("k", settle(0))
	h.want(r2, Reply{Kind: Failed, Code: FailConflict, LeaseLeft: 2800 * time.Millisecond})
}

func TestRenewLeaseLostStopsTheOwner(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k", lease(3*time.Second))
	cause := watch(r1)
	h.grant(r1)
	r2 := h.ask("k")

	h.advance(time.Second)
	h.op(store.OpRenew)
	h.fail(store.ErrLeaseLost)
	e := h.wantPhase("k", phRunning)
	if !e.lost || !errors.Is(cause(), store.ErrLeaseLost) {
		t.Fatalf("after ErrLeaseLost: lost %v cause %v", e.lost, cause())
	}
	if e.timer.idx >= 0 {
		t.Fatalf("a renewal is still scheduled (kind %d at %v)", e.timer.kind, e.timer.at.Sub(t0))
	}
	h.advance(time.Second)
	h.noOp() // no more renewals

	// The owner's result is refused without a store round trip, and the
	// waiter asks the store for the key.
	h.finish(r1, Success, nil)
	h.want(r1, Reply{Kind: Failed, Code: FailLeaseLost, Op: store.OpRenew, Err: store.ErrLeaseLost})
	if o := h.op(store.OpClaim); o.Claim.Owner != "owner-2" || e.owner != r2 {
		t.Fatalf("claim after a lost lease by %q, candidate is the waiter = %v", o.Claim.Owner, e.owner == r2)
	}
	h.wantCounts(1, 0)
}

func TestRenewLeaseLostIsIgnoredWhileTheOwnerStoresItself(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k", lease(3*time.Second))
	cause := watch(r1)
	h.grant(r1)
	h.advance(time.Second)
	h.op(store.OpRenew)
	r1.Finishing() // the owner completes the key in the store itself
	h.fail(store.ErrLeaseLost)
	if e := h.entry("k"); e.lost || cause() != nil {
		t.Fatalf("lease taken for lost while the owner stores: lost %v cause %v", e.lost, cause())
	}
}

// failUntilGivenUp answers every retry of kind k with a store error until the
// shard stops retrying, and returns how many attempts were made after the
// first.
func (h *harness) failUntilGivenUp(k store.OpKind, tok store.Token) int {
	h.t.Helper()
	e := h.entry("k")
	retries := 0
	for e.timer.kind == timerRetry && e.timer.idx >= 0 {
		h.advanceTo(e.timer.at)
		if o := h.op(k); o.Token != tok {
			h.t.Fatalf("retry with token %+v, want %+v", o.Token, tok)
		}
		retries++
		h.fail(errDown)
		if retries > 20 {
			h.t.Fatal("retries do not end")
		}
	}
	return retries
}

func TestCompleteStoreErrorIsRetriedWhileTheLeaseLasts(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k", lease(100*time.Millisecond))
	tok := h.grant(r1)
	r2 := h.ask("k")
	h.finish(r1, Success, nil)
	h.op(store.OpComplete)
	h.fail(errDown)

	// The owner is told at once; the waiter keeps waiting for a retry.
	h.want(r1, Reply{Kind: Failed, Code: FailStore, Op: store.OpComplete, Err: errDown})
	e := h.wantPhase("k", phFinishing)
	if e.owner != nil || e.timer.kind != timerRetry || !e.timer.at.Equal(t0.Add(10*time.Millisecond)) {
		t.Fatalf("after a failed Complete: owner %v, timer kind %d at %v", e.owner, e.timer.kind, e.timer.at.Sub(t0))
	}
	h.wantCounts(1, 1)
	h.noReply(r2)

	h.advance(10 * time.Millisecond)
	if o := h.op(store.OpComplete); o.Token != tok || string(o.Record.Value) != `"v"` {
		t.Fatalf("retry = token %+v value %q", o.Token, o.Record.Value)
	}
	h.run()
	rep := h.want(r2, Reply{Kind: Settled, Joined: true, Waited: true})
	if rep.Result.Value != "v" {
		t.Fatalf("waiter's result = %s", fmtReply(rep))
	}
	h.noReply(r1)
	h.idle()
}

func TestCompleteStoreErrorIsGivenUpWhenTheLeaseEnds(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k", lease(100*time.Millisecond))
	tok := h.grant(r1)
	r2 := h.ask("k")
	h.finish(r1, Success, nil)
	h.fail(errDown)
	h.want(r1, Reply{Kind: Failed, Code: FailStore, Op: store.OpComplete, Err: errDown})

	// Retries at 10, 30, 70 and 150ms: the last one fails past the lease.
	if n := h.failUntilGivenUp(store.OpComplete, tok); n != 4 {
		t.Fatalf("retries = %d, want 4", n)
	}
	if got := h.clk.Now().Sub(t0); got != 150*time.Millisecond {
		t.Fatalf("given up at %v, want 150ms", got)
	}
	h.wantPhase("k", phClaiming)
	h.wantCounts(1, 0)
	tok2 := h.grant(r2) // the store's lease has ended: a takeover
	if tok2.Fence <= tok.Fence {
		t.Fatalf("new token %+v does not fence %+v", tok2, tok)
	}
	h.noReply(r1)
}

func TestReleaseFailureIsRetriedAndSettleZeroCallerConflicts(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k", lease(time.Second))
	tok := h.grant(r1)
	r2 := h.ask("k", fp("b"))
	h.finish(r1, Transient, errTransient)
	h.op(store.OpRelease)
	h.fail(errDown)

	// The owner has its answer; the key stays held while the release is retried.
	h.want(r1, Reply{Kind: Failed, Code: FailOwner, Err: errTransient})
	e := h.wantPhase("k", phReleasing)
	if e.timer.kind != timerRetry || !e.timer.at.Equal(t0.Add(10*time.Millisecond)) {
		t.Fatalf("timer = kind %d at %v, want a retry at 10ms", e.timer.kind, e.timer.at.Sub(t0))
	}
	r3 := h.ask("k", settle(0))
	h.want(r3, Reply{Kind: Failed, Code: FailConflict, LeaseLeft: time.Second})
	other := h.ask("k", fp("other")) // checked against the next owner, later
	h.noReply(other)
	h.wantCounts(1, 2)
	h.advance(5 * time.Millisecond)
	r4 := h.ask("k", settle(0))
	h.want(r4, Reply{Kind: Failed, Code: FailConflict, LeaseLeft: 995 * time.Millisecond})

	h.advance(5 * time.Millisecond)
	if o := h.op(store.OpRelease); o.Token != tok {
		t.Fatalf("release retry token = %+v, want %+v", o.Token, tok)
	}
	h.run()
	h.noReply(r1) // answered once only
	h.wantPhase("k", phClaiming)
	h.grant(r2)
	h.want(other, Reply{Kind: Failed, Code: FailMismatch, Waited: true})
	h.wantCounts(1, 0)
}

func TestReleaseFailureIsGivenUpWhenTheLeaseEnds(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k", lease(100*time.Millisecond))
	tok := h.grant(r1)
	r2 := h.ask("k")
	h.finish(r1, Transient, errTransient)
	h.fail(errDown)
	h.want(r1, Reply{Kind: Failed, Code: FailOwner, Err: errTransient})
	if n := h.failUntilGivenUp(store.OpRelease, tok); n != 4 {
		t.Fatalf("retries = %d, want 4", n)
	}
	h.wantPhase("k", phClaiming)
	h.grant(r2) // the key stayed claimed until its lease ended: a takeover
	h.noReply(r1)
	h.wantCounts(1, 0)
}

// holdElsewhere claims key in the store for another instance.
func (h *harness) holdElsewhere(key string, lease time.Duration) store.Token {
	h.t.Helper()
	res, err := h.mem.Claim(context.Background(), key, store.ClaimRequest{
		Owner: "elsewhere", Lease: lease, TTL: time.Hour, Fingerprint: []byte("x")})
	if err != nil || res.Status != store.Claimed {
		h.t.Fatalf("claim elsewhere: %v %v", res.Status, err)
	}
	return res.Token
}

// remote brings a caller of key to the remote phase.
func (h *harness) remote(key string) *Request {
	h.t.Helper()
	r := h.ask(key, fp("x"))
	h.op(store.OpClaim)
	h.run()
	h.wantPhase(key, phRemote)
	h.noReply(r)
	return r
}

func TestClaimInProgressParksInRemotePhase(t *testing.T) {
	h := newHarness(t)
	other := h.holdElsewhere("k", 5*time.Second)
	r1 := h.remote("k")

	e := h.entry("k")
	h.wantCounts(1, 1)
	if r1.where != parked || !r1.waited || !e.waited || e.owner != nil {
		t.Fatalf("caller where %d waited %v; entry waited %v owner %v", r1.where, r1.waited, e.waited, e.owner)
	}
	if e.left != 5*time.Second || string(e.fp) != "x" || e.token.Fence != other.Fence {
		t.Fatalf("entry of a remote key: left %v fp %q token %+v", e.left, e.fp, e.token)
	}
	if e.timer.kind != timerReclaim || !e.timer.at.Equal(t0.Add(10*time.Millisecond)) {
		t.Fatalf("timer = kind %d at %v, want a re-claim at 10ms", e.timer.kind, e.timer.at.Sub(t0))
	}
	h.want(h.ask("k", settle(0)), Reply{Kind: Failed, Code: FailConflict, LeaseLeft: 5 * time.Second})
	h.want(h.ask("k", fp("y")), Reply{Kind: Failed, Code: FailMismatch})
	h.wantCounts(1, 1)
}

func TestClaimInProgressWithNobodyToWaitDropsTheEntry(t *testing.T) {
	h := newHarness(t)
	h.holdElsewhere("k", 5*time.Second)
	r := h.ask("k", settle(0))
	h.run()
	h.want(r, Reply{Kind: Failed, Code: FailConflict, LeaseLeft: 5 * time.Second})
	h.idle()
}

func TestRemoteKeyIsReclaimedOnWake(t *testing.T) {
	h := newHarness(t)
	other := h.holdElsewhere("k", 5*time.Second)
	r1 := h.remote("k")
	r2 := h.ask("k")
	h.s.onWake("another-key") // nothing there
	h.wantPhase("k", phRemote)
	h.noOp()

	if _, err := h.mem.Complete(context.Background(), "k", other, store.Record{Value: []byte("remote")}, time.Hour); err != nil {
		t.Fatal(err)
	}
	h.s.onWake("k")
	e := h.wantPhase("k", phClaiming)
	if e.owner != r1 || e.timer.idx >= 0 {
		t.Fatalf("on wake: candidate is the first waiter = %v, timer idx %d", e.owner == r1, e.timer.idx)
	}
	h.wantCounts(1, 1)
	h.run()
	for _, r := range []*Request{r1, r2} {
		rep := h.want(r, Reply{Kind: Settled, Joined: true, Waited: true})
		if string(rep.Result.Record.Value) != "remote" || rep.Result.Value != nil {
			t.Fatalf("result of the other instance = %s", fmtReply(rep))
		}
	}
	h.idle()
}

func TestRemoteKeyIsReclaimedOnItsTimer(t *testing.T) {
	h := newHarness(t)
	other := h.holdElsewhere("k", 5*time.Second)
	r1 := h.remote("k")

	h.advance(10 * time.Millisecond)
	h.wantPhase("k", phClaiming)
	h.run() // still held elsewhere
	e := h.wantPhase("k", phRemote)
	if e.left != 4990*time.Millisecond || e.timer.kind != timerReclaim || !e.timer.at.Equal(t0.Add(30*time.Millisecond)) {
		t.Fatalf("second wait: left %v, timer kind %d at %v; want 4.99s, re-claim at 30ms", e.left, e.timer.kind, e.timer.at.Sub(t0))
	}
	h.noReply(r1)

	if err := h.mem.Release(context.Background(), "k", other); err != nil {
		t.Fatal(err)
	}
	h.advance(20 * time.Millisecond)
	h.op(store.OpClaim)
	h.run()
	// Owners 1 and 2 claimed and found the key held; fence 1 is the holder's.
	h.want(r1, Reply{Kind: Grant, Token: store.Token{Fence: 2, Owner: "owner-3"}, Waited: true})
	h.wantPhase("k", phRunning)
	h.wantCounts(1, 0)
}

func TestRemoteReclaimTimerIsBoundedByTheHoldersLease(t *testing.T) {
	h := newHarness(t, waker)
	h.holdElsewhere("k", 5*time.Millisecond)
	r := h.ask("k", fp("x"))
	if o := h.op(store.OpClaim); o.Claim.Waiter != "waker-1" {
		t.Fatalf("claim waiter = %q, want the shard's waker id", o.Claim.Waiter)
	}
	h.run()
	e := h.wantPhase("k", phRemote)
	if e.timer.kind != timerReclaim || !e.timer.at.Equal(t0.Add(6*time.Millisecond)) {
		t.Fatalf("re-claim at %v, want when the holder's lease ends (6ms)", e.timer.at.Sub(t0))
	}
	h.advance(6 * time.Millisecond)
	h.grant(r) // a takeover
}

func TestWakeDuringClaimReclaimsAtOnce(t *testing.T) {
	h := newHarness(t)
	other := h.holdElsewhere("k", 5*time.Second)
	r := h.ask("k", fp("x"))
	h.runStore() // in progress elsewhere…
	if _, err := h.mem.Complete(context.Background(), "k", other, store.Record{Value: []byte("remote")}, time.Hour); err != nil {
		t.Fatal(err)
	}
	h.s.onWake("k") // …which completes and wakes the shard before its answer
	if e := h.entry("k"); !e.woken {
		t.Fatal("wake-up during a claim not remembered")
	}
	h.deliver()
	e := h.wantPhase("k", phClaiming) // asked again at once, no timer
	if e.timer.idx >= 0 || e.owner != r {
		t.Fatalf("after a woken in-progress answer: timer idx %d, candidate ok %v", e.timer.idx, e.owner == r)
	}
	h.run()
	h.want(r, Reply{Kind: Settled, Joined: true, Waited: true})
	h.idle()
}

func TestClosingAnswersWaitersClosed(t *testing.T) {
	h := newHarness(t)
	// a: an owner runs, two callers wait.
	ra := h.ask("a")
	cause := watch(ra)
	h.grant(ra)
	wa1, wa2 := h.ask("a"), h.ask("a")
	// c: held elsewhere.
	h.holdElsewhere("c", 5*time.Second)
	rc := h.remote("c")
	// b: its claim is out.
	rb := h.ask("b")
	h.op(store.OpClaim)
	h.wantCounts(3, 3)

	h.s.onClosing()
	for _, r := range []*Request{wa1, wa2, rc, rb} {
		h.want(r, Reply{Kind: Failed, Code: FailClosed, Waited: r.waited})
	}
	if !errors.Is(cause(), errClosing) {
		t.Fatalf("running owner's cause = %v, want errClosing", cause())
	}
	if rb.where != gone {
		t.Fatalf("candidate where = %d, want gone", rb.where)
	}
	h.wantCounts(2, 0) // c is gone; a and b drain
	h.want(h.ask("a"), Reply{Kind: Failed, Code: FailClosed})
	h.want(h.ask("z"), Reply{Kind: Failed, Code: FailClosed})
	select {
	case <-h.s.drained:
		t.Fatal("drained while keys are still held")
	default:
	}

	// b's claim comes back granted: it is released, nobody is told.
	h.run()
	h.op(store.OpRelease)
	h.run()
	h.noReply(rb)
	h.wantCounts(1, 0)

	// a's owner finishes and stores its result.
	h.finish(ra, Success, nil)
	h.run()
	h.want(ra, Reply{Kind: Settled})
	h.idle()
	select {
	case <-h.s.drained:
	default:
		t.Fatal("not drained once every key is settled")
	}
}

func TestParkedCallerThatLeavesIsNotAnswered(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k")
	h.grant(r1)
	r2 := h.ask("k", settle(time.Second))
	h.s.onAbandon(r2)
	if r2.where != gone {
		t.Fatalf("where = %d, want gone", r2.where)
	}
	h.wantCounts(1, 0)
	h.advance(time.Second) // its settle time ends: nothing to answer
	h.finish(r1, Success, nil)
	h.run()
	h.want(r1, Reply{Kind: Settled})
	h.noReply(r2)
	h.idle()
}

func TestCandidateThatLeavesReleasesItsClaimForTheNextWaiter(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k", lease(time.Second))
	r2 := h.ask("k", lease(20*time.Second))
	h.s.onAbandon(r1) // while its claim is out
	h.run()           // granted to nobody: released
	h.wantPhase("k", phReleasing)
	h.op(store.OpRelease)
	h.run()
	if o := h.op(store.OpClaim); o.Claim.Lease != 20*time.Second || o.Claim.Owner != "owner-2" {
		t.Fatalf("next claim = %+v, want the waiter's own", o.Claim)
	}
	h.run()
	h.want(r2, Reply{Kind: Grant, Token: store.Token{Fence: 2, Owner: "owner-2"}, Waited: true})
	h.noReply(r1)
}

func TestOwnerThatLeavesAtItsGrantHandsTheKeyOn(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k")
	h.grant(r1)
	r2 := h.ask("k")
	h.s.onAbandon(r1) // it left as it was granted: it will not run
	h.wantPhase("k", phReleasing)
	h.run()
	h.op(store.OpClaim)
	h.run()
	h.want(r2, Reply{Kind: Grant, Token: store.Token{Fence: 2, Owner: "owner-2"}, Waited: true})
	h.noReply(r1)
	h.wantCounts(1, 0)
}

func TestLastRemoteWaiterThatLeavesDropsTheEntry(t *testing.T) {
	h := newHarness(t)
	h.holdElsewhere("k", 5*time.Second)
	r := h.remote("k")
	h.s.onAbandon(r)
	h.idle()
	h.advance(time.Second) // its re-claim timer is gone with it
	h.noOp()
}

func TestClaimStoreErrorFailsEveryone(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k")
	r2 := h.ask("k")
	h.op(store.OpClaim)
	h.fail(errDown)
	h.want(r1, Reply{Kind: Failed, Code: FailStore, Op: store.OpClaim, Err: errDown})
	h.want(r2, Reply{Kind: Failed, Code: FailStore, Op: store.OpClaim, Err: errDown, Waited: true})
	h.idle()
}

func TestPromotedWaiterKeepsItsSettleTimeWhileItClaims(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k")
	h.grant(r1)
	r2 := h.ask("k", settle(100*time.Millisecond))
	h.advance(50 * time.Millisecond)
	h.finish(r1, Transient, errTransient)
	h.run()
	h.want(r1, Reply{Kind: Failed, Code: FailOwner, Err: errTransient})
	e := h.wantPhase("k", phClaiming)
	if e.owner != r2 {
		t.Fatal("the waiter is not the candidate")
	}

	h.advance(50 * time.Millisecond) // its settle time ends with its claim out
	h.want(r2, Reply{Kind: Failed, Code: FailConflict, Waited: true})
	if r2.where != gone {
		t.Fatalf("candidate where = %d, want gone", r2.where)
	}
	h.run() // granted to a caller that left: released
	h.op(store.OpRelease)
	h.run()
	h.noReply(r2)
	h.idle()
}

func TestInlineOwnerThatStoredItselfSettlesTheWaiters(t *testing.T) {
	h := newHarness(t, inline)
	r1 := h.ask("k")
	tok := h.want(r1, Reply{Kind: Grant, Token: store.Token{Fence: 1, Owner: "owner-1"}}).Token
	r2 := h.ask("k")
	r1.Finishing()
	rec, err := h.mem.Complete(context.Background(), "k", tok, store.Record{Value: []byte(`"v"`)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cached{Record: rec, Value: "v"}
	r1.Finish = Finish{Req: r1, Kind: Success, Stored: true, Result: c}
	h.s.onFinish(&r1.Finish)
	if rep := h.want(r2, Reply{Kind: Settled, Joined: true, Waited: true}); rep.Result != c {
		t.Fatalf("waiter's result is not the stored one: %s", fmtReply(rep))
	}
	h.noReply(r1) // it has its answer
	h.idle()
}

func TestRenewalStoreErrorRetriesAndStopsTheOwnerPastItsLease(t *testing.T) {
	h := newHarness(t)
	r1 := h.ask("k", lease(3*time.Second))
	cause := watch(r1)
	h.grant(r1)

	h.advance(time.Second)
	h.op(store.OpRenew)
	h.fail(errDown)
	e := h.wantPhase("k", phRunning)
	if e.lost || cause() != nil || !e.timer.at.Equal(t0.Add(2*time.Second)) || !e.leaseAt.Equal(t0) {
		t.Fatalf("after a failed renewal: lost %v cause %v next %v leaseAt %v", e.lost, cause(), e.timer.at.Sub(t0), e.leaseAt.Sub(t0))
	}
	h.advance(time.Second)
	h.fail(errDown)
	h.advance(time.Second) // the lease has run out
	h.op(store.OpRenew)
	h.fail(errDown)
	if !errors.Is(cause(), store.ErrLeaseLost) || e.lost {
		t.Fatalf("past the lease: cause %v lost %v; want the owner told to stop, its result still offered", cause(), e.lost)
	}
	if e.timer.kind != timerRenew || e.timer.idx < 0 {
		t.Fatal("renewals stopped after a store error")
	}
}

func TestWakeForAllKeysReclaimsEveryRemoteKey(t *testing.T) {
	h := newHarness(t)
	h.holdElsewhere("a", 5*time.Second)
	h.holdElsewhere("b", 5*time.Second)
	h.remote("a")
	h.remote("b")
	h.s.onWake("")
	h.wantPhase("a", phClaiming)
	h.wantPhase("b", phClaiming)
	if len(h.batch) != 1 || h.queued() != 1 {
		t.Fatalf("claims out %d, queued %d; want 1 and 1", len(h.batch), h.queued())
	}
	h.wantCounts(2, 0)
}
