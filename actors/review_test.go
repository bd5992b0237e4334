package actors

// Adversarial review tests of the rewritten engine (step.go, shell.go).
// A test whose name starts with TestBug documents a bug found in review;
// it fails until the bug is fixed.

import (
	"testing"

	"github.com/idemrt/idem/store"
)

// BUG: an owner that leaves as it is granted the key (Abandon of a caller
// whose ctx ended with the Grant in its channel) releases the key only in
// phRunning. If a renewal found the lease lost before the Abandon arrived
// (phLost), nothing happens: no Finish will ever come, no timer is armed,
// and the waiters are parked for ever (Close hangs on the entry too). The
// old engine kept "lost" as a flag on phRunning and released the key.
func TestBugOwnerLeavingAfterLeaseLostStrandsTheKey(t *testing.T) {
	w, owner := running(t)
	waiter := w.arrive(req())
	w.step(event{kind: evTimer, timer: timerRenew})
	w.answer(store.OpRenew, store.ClaimResult{}, store.ErrLeaseLost)
	w.wantPhase(phLost)
	w.step(event{kind: evLeave, req: owner})
	if len(w.out) == 0 && !w.done && len(w.fx.timers) == 0 {
		t.Fatalf("the owner left in phase lost: no store operation, no timer, waiter parked for ever (phase %s)", phaseName(w.k.phase))
	}
	// However it gets there, the waiter must be handed the key.
	for len(w.out) > 0 && w.out[0].kind == store.OpRelease {
		w.answer(store.OpRelease, store.ClaimResult{}, store.ErrLeaseLost)
	}
	w.granted()
	w.wantReply(waiter, Grant)
}
