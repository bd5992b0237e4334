// Package storetest is the conformance suite of the [store.Store] contract.
// Every store runs it: the in-memory store against a fake clock, the Redis
// store against real redis-server processes (one node and a cluster).
//
// It checks the lifecycle table of package store case by case, the edge
// cases that existing idempotency libraries got wrong (fingerprints lost on a
// path, stale owners overwriting results, leases expiring early, zero TTLs
// taken as "no expiry"), and random operation sequences against a small
// reference model. Stores that implement [store.Inspector] and
// [store.Scanner] are checked against them too: Inspect in every state of a
// key, Scan of prefixes made of glob characters, escapes and braces, over
// pages of any size, while keys come and go.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

// Harness tells the suite how to make and drive a store.
type Harness struct {
	// New returns an empty store for one test; it registers its own cleanup.
	New func(t testing.TB) store.Store
	// Advance moves the store's clock forward by d: a fake clock's Advance,
	// or a sleep for a store that runs on real time.
	Advance func(t testing.TB, d time.Duration)
	// Unit is the short lease and TTL the suite uses. A lease of one Unit has
	// expired after Advance(2*Unit); a lease of 1000 Units never expires
	// during a test. On real time it must be well above one operation's
	// latency (50ms suits a local Redis), and the suite allows for the time
	// its calls take: a reply from a call that may have run after a short
	// lease or TTL ended may show it live or ended, and record times read
	// back may be off by the length of the calls that returned them.
	Unit time.Duration
	// Exact is true when Advance moves a fake clock exactly, with no time
	// passing otherwise; the suite then also checks the lease boundary to the
	// nanosecond.
	Exact bool
	// RandomOps is the length of each random sequence. Default: 300.
	RandomOps int
	// Seeds is how many random sequences run. Default: 4.
	Seeds int
}

// Run runs the whole suite against h.
func Run(t *testing.T, h Harness) {
	if h.New == nil || h.Advance == nil || h.Unit <= 0 {
		t.Fatal("storetest: Harness needs New, Advance and a positive Unit")
	}
	if h.RandomOps == 0 {
		h.RandomOps = 300
	}
	if h.Seeds == 0 {
		h.Seeds = 4
	}
	s := &suite{h: h}
	t.Run("ClaimAbsent", s.claimAbsent)
	t.Run("ClaimReplaySameOwner", s.claimReplay)
	t.Run("ClaimInProgress", s.claimInProgress)
	t.Run("Takeover", s.takeover)
	t.Run("StaleOwnerFenced", s.staleOwnerFenced)
	t.Run("FencesRise", s.fencesRise)
	t.Run("FencesRiseOnEveryKey", s.fencesRiseOnEveryKey)
	t.Run("CompleteAfterExpiryUntaken", s.completeAfterExpiryUntaken)
	t.Run("RecordRoundTrip", s.recordRoundTrip)
	t.Run("PermanentErrorRoundTrip", s.permanentErrorRoundTrip)
	t.Run("CompleteReplay", s.completeReplay)
	t.Run("ReleaseGivesKeyBack", s.releaseGivesKeyBack)
	t.Run("RenewKeepsClaim", s.renewKeepsClaim)
	t.Run("ResultTTL", s.resultTTL)
	t.Run("GetAndForget", s.getAndForget)
	t.Run("InvalidArguments", s.invalidArguments)
	t.Run("LongestDurations", s.longestDurations)
	t.Run("OddKeys", s.oddKeys)
	t.Run("ConcurrentClaims", s.concurrentClaims)
	t.Run("Batch", s.batch)
	t.Run("Waker", s.waker)
	t.Run("Invalidator", s.invalidator)
	t.Run("Liveness", s.liveness)
	t.Run("InspectStates", s.inspectStates)
	t.Run("InspectExpiry", s.inspectExpiry)
	t.Run("InspectOddKeys", s.inspectOddKeys)
	t.Run("ScanEmpty", s.scanEmpty)
	t.Run("ScanPrefixes", s.scanPrefixes)
	t.Run("ScanChanges", s.scanChanges)
	t.Run("Random", s.random)
}

type suite struct{ h Harness }

var ctx = context.Background()

const long = 1000

func (s *suite) short() time.Duration { return s.h.Unit }
func (s *suite) long() time.Duration  { return long * s.h.Unit }

// expire advances the clock far enough for every short lease and TTL to end.
func (s *suite) expire(t testing.TB) { s.h.Advance(t, 2*s.h.Unit) }

func (s *suite) claim(t testing.TB, st store.Store, key, owner string, lease time.Duration, fp []byte) store.ClaimResult {
	t.Helper()
	res, err := st.Claim(ctx, key, store.ClaimRequest{Owner: owner, Lease: lease, TTL: s.long(), Fingerprint: fp})
	if err != nil {
		t.Fatalf("Claim(%q, %q): %v", key, owner, err)
	}
	return res
}

func (s *suite) mustClaim(t testing.TB, st store.Store, key, owner string, lease time.Duration) store.Token {
	t.Helper()
	res := s.claim(t, st, key, owner, lease, nil)
	if res.Status != store.Claimed {
		t.Fatalf("Claim(%q, %q) = %v, want claimed", key, owner, res.Status)
	}
	return res.Token
}

func wantErr(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v, want %v", what, err, target)
	}
}

// whileLive runs try, which grants a short lease or TTL on key and checks
// that it is still live, on fresh keys until a try counts, and returns that
// try's key. On real time a try counts when it ended within a Unit (less
// the store's rounding) of its start: the grant surely was live throughout,
// so a failed check fails the test. A slower try (the machine stalled)
// proves nothing and is repeated. On a fake clock (Exact) time moves only in
// Advance, so the first try counts.
func (s *suite) whileLive(t *testing.T, try func(key string) error) string {
	t.Helper()
	const tries = 20
	for i := range tries {
		key := fmt.Sprint("k", i)
		start := time.Now()
		err := try(key)
		took := time.Since(start)
		if err == nil {
			return key
		}
		if s.h.Exact || took < s.h.Unit-s.h.Unit/10 {
			t.Fatal(err)
		}
		t.Logf("try %d took %v, too long to tell for a %v lease or TTL; trying again (%v)", i, took, s.h.Unit, err)
	}
	t.Fatalf("%d tries each took more than %v: the machine is too slow for a Unit of %v", tries, s.h.Unit-s.h.Unit/10, s.h.Unit)
	return ""
}

func (s *suite) checkRecord(t testing.TB, what string, got, want store.Record, ttl time.Duration) {
	t.Helper()
	if err := s.recordErr(what, got, want, ttl); err != nil {
		t.Fatal(err)
	}
}

// recordErr compares a record a call returned with the one the call stored,
// and its life with ttl.
func (s *suite) recordErr(what string, got, want store.Record, ttl time.Duration) error {
	if !sameContent(got, want) {
		return fmt.Errorf("%s: record %+v, want %+v", what, got, want)
	}
	if got.CreatedAt.IsZero() || got.ExpiresAt.IsZero() {
		return fmt.Errorf("%s: record times unset: %+v", what, got)
	}
	if d := got.ExpiresAt.Sub(got.CreatedAt) - ttl; d < -s.h.Unit/10 || d > s.h.Unit/10 {
		return fmt.Errorf("%s: record lives %v, want %v", what, got.ExpiresAt.Sub(got.CreatedAt), ttl)
	}
	return nil
}

// sameContent reports whether two records hold the same result, fingerprint
// and token, whatever their times.
func sameContent(got, want store.Record) bool {
	return bytes.Equal(got.Value, want.Value) && got.Failed == want.Failed && got.Error == want.Error &&
		bytes.Equal(got.Fingerprint, want.Fingerprint) && got.Token == want.Token
}
