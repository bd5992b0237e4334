package storetest_test

import (
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/storetest"
)

// The model's verdicts on small hand-written histories: each one either a
// behaviour the contract allows (including replies lost to faults) or one it
// forbids.

const (
	lease = time.Hour
	inf   = math.MaxInt64
)

type hop struct {
	call, ret int64
	in        storetest.LinearInput
	out       storetest.LinearOutput
}

func claimIn(owner string) storetest.LinearInput {
	return storetest.LinearInput{Kind: store.OpClaim, Key: "k", Owner: owner, Lease: lease, TTL: lease}
}

func claimed(owner string, fence uint64) storetest.LinearOutput {
	return storetest.LinearOutput{Status: store.Claimed, Token: store.Token{Fence: fence, Owner: owner}, Attempt: 1, LeaseLeft: lease}
}

func inProgress(fence uint64) storetest.LinearOutput {
	return storetest.LinearOutput{Status: store.InProgress, Token: store.Token{Fence: fence}, LeaseLeft: lease / 2}
}

func tokIn(kind store.OpKind, owner string, fence uint64) storetest.LinearInput {
	return storetest.LinearInput{Kind: kind, Key: "k", Token: store.Token{Fence: fence, Owner: owner}, Lease: lease}
}

var (
	ok        = storetest.LinearOutput{}
	unknown   = storetest.LinearOutput{Unknown: true}
	leaseLost = storetest.LinearOutput{Err: storetest.LeaseLost}
)

func check(t *testing.T, exact bool, want porcupine.CheckResult, hist []hop) {
	t.Helper()
	ops := make([]porcupine.Operation, len(hist))
	for i, h := range hist {
		ops[i] = porcupine.Operation{ClientId: i, Call: h.call, Return: h.ret, Input: h.in, Output: h.out}
	}
	model := storetest.LinearModel(exact, lease, time.Millisecond)
	if got := porcupine.CheckOperationsTimeout(model, ops, 10*time.Second); got != want {
		t.Fatalf("check = %v, want %v", got, want)
	}
}

func TestLinearModelSequential(t *testing.T) {
	rec := storetest.LinearRecord{Value: "v", Token: store.Token{Fence: 3, Owner: "a"}, Life: lease}
	check(t, false, porcupine.Ok, []hop{
		{0, 1, claimIn("a"), claimed("a", 3)},
		{2, 3, claimIn("b"), inProgress(3)},
		{4, 5, claimIn("a"), claimed("a", 3)}, // a replay
		{6, 7, tokIn(store.OpRenew, "a", 3), ok},
		{8, 9, storetest.LinearInput{Kind: store.OpComplete, Key: "k", Token: rec.Token, Value: "v", TTL: lease},
			storetest.LinearOutput{Record: rec}},
		{10, 11, storetest.LinearInput{Kind: store.OpGet, Key: "k"}, storetest.LinearOutput{Record: rec}},
		{12, 13, tokIn(store.OpRelease, "a", 3), leaseLost},
		{14, 15, storetest.LinearInput{Kind: store.OpForget, Key: "k"}, ok},
		{16, 17, claimIn("c"), claimed("c", 4)}, // a new record: attempt 1, a fence above 3
	})
}

// Fences never go back for a key: a claim after a Forget (or a release)
// answers a fence above every earlier one.
func TestLinearModelFenceRisesAcrossRecords(t *testing.T) {
	rec := storetest.LinearRecord{Value: "v", Token: store.Token{Fence: 3, Owner: "a"}, Life: lease}
	hist := []hop{
		{0, 1, claimIn("a"), claimed("a", 3)},
		{2, 3, storetest.LinearInput{Kind: store.OpComplete, Key: "k", Token: rec.Token, Value: "v", TTL: lease},
			storetest.LinearOutput{Record: rec}},
		{4, 5, storetest.LinearInput{Kind: store.OpForget, Key: "k"}, ok},
		{6, 7, claimIn("b"), claimed("b", 3)},
	}
	check(t, false, porcupine.Illegal, hist)
	hist[3].out = claimed("b", 1000)
	check(t, false, porcupine.Ok, hist)
}

// Attempt counts the claims of a record: 2 for a takeover, the holder's
// own for its claim again, 1 after a release.
func TestLinearModelAttempt(t *testing.T) {
	tick := hop{2, 3, storetest.LinearInput{Advance: 2 * time.Second}, ok}
	short := claimIn("a")
	short.Lease = time.Second
	first := claimed("a", 1)
	first.LeaseLeft = time.Second
	takeover := claimed("b", 2)
	takeover.Takeover, takeover.Attempt = true, 2
	again := takeover
	again.Takeover = false
	hist := []hop{
		{0, 1, short, first},
		tick,
		{4, 5, claimIn("b"), takeover},
		{6, 7, claimIn("b"), again},
		{8, 9, tokIn(store.OpRelease, "b", 2), ok},
		{10, 11, claimIn("c"), claimed("c", 3)},
	}
	check(t, true, porcupine.Ok, hist)
	for i, wrong := range []uint32{1, 3} {
		bad := append([]hop(nil), hist...)
		bad[2+i].out.Attempt = wrong
		check(t, true, porcupine.Illegal, bad)
	}
	bad := append([]hop(nil), hist...)
	bad[5].out.Attempt = 3 // counted on across the release
	check(t, true, porcupine.Illegal, bad)
}

// A Release that released the key, answered ErrLeaseLost because a retry ran
// after another client's claim: the history is not linearizable.
func TestLinearModelReleaseRetried(t *testing.T) {
	hist := []hop{
		{0, 1, claimIn("a"), claimed("a", 1)},
		{2, 50, tokIn(store.OpRelease, "a", 1), leaseLost},
		{10, 20, claimIn("b"), claimed("b", 2)},
	}
	check(t, false, porcupine.Illegal, hist)
	hist[1].ret, hist[1].out = inf, unknown // the same Release, timed out
	check(t, false, porcupine.Ok, hist)
}

// A claim whose reply was lost holds the key with a fence only later
// replies show; from then on the key keeps that fence.
func TestLinearModelUnknownClaim(t *testing.T) {
	hist := []hop{
		{0, inf, claimIn("a"), unknown},
		{10, 11, claimIn("b"), inProgress(4)},
		{12, 13, claimIn("a"), claimed("a", 4)},
		{14, 15, claimIn("c"), inProgress(4)},
	}
	check(t, false, porcupine.Ok, hist)
	hist[3].out = inProgress(5)
	check(t, false, porcupine.Illegal, hist)
	// The unknown claim may also never have happened.
	check(t, false, porcupine.Ok, []hop{hist[0], {10, 11, claimIn("b"), claimed("b", 1)}})
}

// A new claim's fence is above every earlier one.
func TestLinearModelFenceIncreases(t *testing.T) {
	check(t, false, porcupine.Illegal, []hop{
		{0, 1, claimIn("a"), claimed("a", 5)},
		{2, 3, tokIn(store.OpRelease, "a", 5), ok},
		{4, 5, claimIn("b"), claimed("b", 5)},
	})
}

// On an exact clock a lease ends at its last nanosecond and the key is
// taken over; a record ends at its TTL.
func TestLinearModelExactClock(t *testing.T) {
	tick := func(at int64, d time.Duration) hop {
		return hop{at, at + 1, storetest.LinearInput{Advance: d}, ok}
	}
	short := claimIn("a")
	short.Lease = time.Second
	out := claimed("a", 1)
	out.LeaseLeft = time.Second
	left := inProgress(1)
	left.LeaseLeft = time.Nanosecond
	takeover := claimed("b", 2)
	takeover.Takeover, takeover.Attempt = true, 2
	hist := []hop{
		{0, 1, short, out},
		tick(2, time.Second-1),
		{4, 5, claimIn("b"), left},
		tick(6, 1),
		{8, 9, claimIn("b"), takeover},
	}
	check(t, true, porcupine.Ok, hist)
	hist[3] = tick(6, 0)
	check(t, true, porcupine.Illegal, hist)
}
