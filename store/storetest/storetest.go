// Package storetest is the conformance suite of the [store.Store] contract.
// Every store runs it: the in-memory store against a fake clock, the Redis
// store against real redis-server processes (one node and a cluster).
//
// It checks the lifecycle table of package store case by case, the edge
// cases that existing idempotency libraries got wrong (fingerprints lost on a
// path, stale owners overwriting results, leases expiring early, zero TTLs
// taken as "no expiry"), and random operation sequences against a small
// reference model.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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
	t.Run("CompleteAfterExpiryUntaken", s.completeAfterExpiryUntaken)
	t.Run("RecordRoundTrip", s.recordRoundTrip)
	t.Run("PermanentErrorRoundTrip", s.permanentErrorRoundTrip)
	t.Run("CompleteReplay", s.completeReplay)
	t.Run("FailReleases", s.failReleases)
	t.Run("ExtendRenews", s.extendRenews)
	t.Run("ResultTTL", s.resultTTL)
	t.Run("GetAndForget", s.getAndForget)
	t.Run("InvalidArguments", s.invalidArguments)
	t.Run("LongestDurations", s.longestDurations)
	t.Run("OddKeys", s.oddKeys)
	t.Run("ConcurrentClaims", s.concurrentClaims)
	t.Run("Batch", s.batch)
	t.Run("Waker", s.waker)
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

func (s *suite) claimAbsent(t *testing.T) {
	st := s.h.New(t)
	res := s.claim(t, st, "k", "owner-1", s.long(), []byte("fp"))
	if res.Status != store.Claimed || res.Takeover {
		t.Fatalf("status %v takeover %v, want claimed, no takeover", res.Status, res.Takeover)
	}
	if res.Token.Fence == 0 || res.Token.Owner != "owner-1" {
		t.Fatalf("token %+v: want a positive fence and owner-1", res.Token)
	}
	if res.LeaseLeft <= 0 || res.LeaseLeft > s.long() {
		t.Fatalf("lease left %v, want in (0, %v]", res.LeaseLeft, s.long())
	}
}

func (s *suite) claimReplay(t *testing.T) {
	st := s.h.New(t)
	first := s.mustClaim(t, st, "k", "owner-1", s.long())
	again := s.claim(t, st, "k", "owner-1", s.long(), nil)
	if again.Status != store.Claimed || again.Token != first {
		t.Fatalf("replayed claim = %v %+v, want claimed with %+v", again.Status, again.Token, first)
	}
}

func (s *suite) claimInProgress(t *testing.T) {
	st := s.h.New(t)
	tok := s.claim(t, st, "k", "owner-1", s.long(), []byte("fp-\x00\xff")).Token
	res := s.claim(t, st, "k", "owner-2", s.long(), []byte("other"))
	if res.Status != store.InProgress {
		t.Fatalf("second claim = %v, want in-progress", res.Status)
	}
	if res.LeaseLeft <= 0 || res.LeaseLeft > s.long() {
		t.Fatalf("lease left %v, want in (0, %v]", res.LeaseLeft, s.long())
	}
	if !bytes.Equal(res.Fingerprint, []byte("fp-\x00\xff")) {
		t.Fatalf("holder fingerprint %q, want the owner's", res.Fingerprint)
	}
	if res.Token.Fence != tok.Fence {
		t.Fatalf("holder fence %d, want %d", res.Token.Fence, tok.Fence)
	}
}

func (s *suite) takeover(t *testing.T) {
	st := s.h.New(t)
	var old store.Token
	key := s.whileLive(t, func(key string) error {
		old = s.mustClaim(t, st, key, "owner-1", s.short())
		if res := s.claim(t, st, key, "owner-2", s.long(), nil); res.Status != store.InProgress {
			return fmt.Errorf("claim during a live lease = %v, want in-progress (a lease never expires early)", res.Status)
		}
		if s.h.Exact {
			s.h.Advance(t, s.h.Unit-1)
			if res := s.claim(t, st, key, "owner-2", s.long(), nil); res.Status != store.InProgress || res.LeaseLeft != 1 {
				return fmt.Errorf("claim 1ns before the lease ends = %v (left %v), want in-progress with 1ns left", res.Status, res.LeaseLeft)
			}
			return nil
		}
		s.h.Advance(t, s.h.Unit/2)
		if res := s.claim(t, st, key, "owner-2", s.long(), nil); res.Status != store.InProgress {
			return fmt.Errorf("claim half way through the lease = %v, want in-progress", res.Status)
		}
		return nil
	})
	s.expire(t)
	res := s.claim(t, st, key, "owner-2", s.long(), nil)
	if res.Status != store.Claimed || !res.Takeover {
		t.Fatalf("claim after the lease = %v takeover=%v, want a claimed takeover", res.Status, res.Takeover)
	}
	if res.Token.Fence <= old.Fence {
		t.Fatalf("takeover fence %d, want more than %d", res.Token.Fence, old.Fence)
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

func (s *suite) staleOwnerFenced(t *testing.T) {
	st := s.h.New(t)
	old := s.mustClaim(t, st, "k", "owner-1", s.short())
	s.expire(t)
	cur := s.mustClaim(t, st, "k", "owner-2", s.long())
	_, err := st.Complete(ctx, "k", old, store.Record{Value: []byte("stale")}, s.long())
	wantErr(t, "stale Complete", err, store.ErrLeaseLost)
	wantErr(t, "stale Renew", st.Renew(ctx, "k", old, s.long()), store.ErrLeaseLost)
	wantErr(t, "stale Release", st.Release(ctx, "k", old), store.ErrLeaseLost)
	forged := store.Token{Fence: cur.Fence, Owner: "owner-1"}
	_, err = st.Complete(ctx, "k", forged, store.Record{Value: []byte("forged")}, s.long())
	wantErr(t, "Complete with the right fence and the wrong owner", err, store.ErrLeaseLost)
	rec, err := st.Complete(ctx, "k", cur, store.Record{Value: []byte("new")}, s.long())
	if err != nil || string(rec.Value) != "new" {
		t.Fatalf("current owner's Complete = %q, %v", rec.Value, err)
	}
	_, err = st.Complete(ctx, "k", old, store.Record{Value: []byte("stale")}, s.long())
	wantErr(t, "stale Complete after completion", err, store.ErrLeaseLost)
	got, err := st.Get(ctx, "k")
	if err != nil || string(got.Value) != "new" {
		t.Fatalf("Get = %q, %v; want the new owner's result", got.Value, err)
	}
}

func (s *suite) completeAfterExpiryUntaken(t *testing.T) {
	st := s.h.New(t)
	tok := s.mustClaim(t, st, "k", "owner-1", s.short())
	s.expire(t)
	if err := st.Renew(ctx, "k", tok, s.long()); err != nil {
		t.Fatalf("Renew after expiry, untaken: %v", err)
	}
	if res := s.claim(t, st, "k", "owner-2", s.long(), nil); res.Status != store.InProgress {
		t.Fatalf("claim after the renewal = %v, want in-progress", res.Status)
	}
	tok2 := s.mustClaim(t, st, "k2", "owner-1", s.short())
	s.expire(t)
	if _, err := st.Complete(ctx, "k2", tok2, store.Record{Value: []byte("v")}, s.long()); err != nil {
		t.Fatalf("Complete after expiry, untaken: %v", err)
	}
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
	if !bytes.Equal(got.Value, want.Value) || got.Failed != want.Failed || got.Error != want.Error ||
		!bytes.Equal(got.Fingerprint, want.Fingerprint) || got.Token != want.Token {
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

func (s *suite) recordRoundTrip(t *testing.T) {
	st := s.h.New(t)
	fp := []byte("sha256:\x00\x01\xfe\xff:{}")
	value := make([]byte, 300)
	for i := range value {
		value[i] = byte(i)
	}
	tok := s.claim(t, st, "k", "owner-1", s.long(), fp).Token
	before := time.Now()
	rec, err := st.Complete(ctx, "k", tok, store.Record{Value: value, Fingerprint: fp}, s.long())
	if err != nil {
		t.Fatal(err)
	}
	want := store.Record{Value: value, Fingerprint: fp, Token: tok}
	s.checkRecord(t, "Complete", rec, want, s.long())
	_ = before
	res := s.claim(t, st, "k", "owner-2", s.long(), fp)
	if res.Status != store.Completed {
		t.Fatalf("claim of a completed key = %v", res.Status)
	}
	s.checkRecord(t, "Claim", res.Record, want, s.long())
	got, err := st.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	s.checkRecord(t, "Get", got, want, s.long())
	value[0] = 99 // the store must have kept its own copy
	got, _ = st.Get(ctx, "k")
	if got.Value[0] != 0 {
		t.Fatal("the store kept the caller's slice instead of a copy")
	}
}

func (s *suite) permanentErrorRoundTrip(t *testing.T) {
	st := s.h.New(t)
	tok := s.claim(t, st, "k", "owner-1", s.long(), []byte("fp")).Token
	in := store.Record{Failed: true, Error: "card declined: insufficient funds (code 51)", Fingerprint: []byte("fp")}
	if _, err := st.Complete(ctx, "k", tok, in, s.long()); err != nil {
		t.Fatal(err)
	}
	in.Token = tok
	res := s.claim(t, st, "k", "owner-2", s.long(), nil)
	if res.Status != store.Completed {
		t.Fatalf("claim of a key with a stored error = %v", res.Status)
	}
	s.checkRecord(t, "Claim", res.Record, in, s.long())
	tok2 := s.mustClaim(t, st, "empty", "owner-1", s.long())
	if _, err := st.Complete(ctx, "empty", tok2, store.Record{}, s.long()); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, "empty")
	if err != nil || len(got.Value) != 0 || got.Failed {
		t.Fatalf("empty value round trip: %+v, %v", got, err)
	}
}

func (s *suite) completeReplay(t *testing.T) {
	st := s.h.New(t)
	tok := s.mustClaim(t, st, "k", "owner-1", s.long())
	first, err := st.Complete(ctx, "k", tok, store.Record{Value: []byte("v1")}, s.long())
	if err != nil {
		t.Fatal(err)
	}
	again, err := st.Complete(ctx, "k", tok, store.Record{Value: []byte("v2")}, s.long())
	if err != nil {
		t.Fatalf("replayed Complete: %v", err)
	}
	if string(again.Value) != "v1" || again.Token != first.Token {
		t.Fatalf("replayed Complete returned %q, want the stored v1", again.Value)
	}
}

func (s *suite) failReleases(t *testing.T) {
	st := s.h.New(t)
	if err := st.Release(ctx, "absent", store.Token{Fence: 1, Owner: "x"}); err != nil {
		t.Fatalf("Release of an absent key: %v, want nil", err)
	}
	tok := s.mustClaim(t, st, "k", "owner-1", s.long())
	wantErr(t, "Release by another owner", st.Release(ctx, "k", store.Token{Fence: tok.Fence, Owner: "owner-2"}), store.ErrLeaseLost)
	if err := st.Release(ctx, "k", tok); err != nil {
		t.Fatal(err)
	}
	next := s.mustClaim(t, st, "k", "owner-2", s.long())
	if next.Fence <= tok.Fence {
		t.Fatalf("fence after release %d, want more than %d", next.Fence, tok.Fence)
	}
	if _, err := st.Complete(ctx, "k", next, store.Record{Value: []byte("v")}, s.long()); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "Release of a completed key", st.Release(ctx, "k", next), store.ErrLeaseLost)
	if got, err := st.Get(ctx, "k"); err != nil || string(got.Value) != "v" {
		t.Fatalf("Release removed a completed record: %q, %v", got.Value, err)
	}
}

func (s *suite) extendRenews(t *testing.T) {
	st := s.h.New(t)
	tok := s.mustClaim(t, st, "k", "owner-1", s.short())
	if err := st.Renew(ctx, "k", tok, s.long()); err != nil {
		t.Fatal(err)
	}
	s.expire(t)
	if res := s.claim(t, st, "k", "owner-2", s.long(), nil); res.Status != store.InProgress {
		t.Fatalf("claim after a renewal = %v, want in-progress", res.Status)
	}
	wantErr(t, "Renew of an absent key", st.Renew(ctx, "absent", tok, s.long()), store.ErrLeaseLost)
	if _, err := st.Complete(ctx, "k", tok, store.Record{}, s.long()); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "Renew of a completed key", st.Renew(ctx, "k", tok, s.long()), store.ErrLeaseLost)
}

func (s *suite) resultTTL(t *testing.T) {
	st := s.h.New(t)
	var tok store.Token
	key := s.whileLive(t, func(key string) error {
		tok = s.mustClaim(t, st, key, "owner-1", s.long())
		if _, err := st.Complete(ctx, key, tok, store.Record{Value: []byte("v")}, s.short()); err != nil {
			t.Fatal(err)
		}
		if res := s.claim(t, st, key, "owner-2", s.long(), nil); res.Status != store.Completed {
			return fmt.Errorf("claim before the TTL = %v, want completed", res.Status)
		}
		return nil
	})
	s.expire(t)
	_, err := st.Get(ctx, key)
	wantErr(t, "Get after the TTL", err, store.ErrNotFound)
	res := s.claim(t, st, key, "owner-3", s.long(), nil)
	if res.Status != store.Claimed {
		t.Fatalf("claim after the TTL = %v, want claimed", res.Status)
	}
	if res.Token == tok {
		t.Fatal("a new claim reused the old token")
	}
}

func (s *suite) getAndForget(t *testing.T) {
	st := s.h.New(t)
	_, err := st.Get(ctx, "k")
	wantErr(t, "Get of an absent key", err, store.ErrNotFound)
	if err := st.Forget(ctx, "k"); err != nil {
		t.Fatalf("Forget of an absent key: %v", err)
	}
	tok := s.mustClaim(t, st, "k", "owner-1", s.long())
	_, err = st.Get(ctx, "k")
	wantErr(t, "Get of a key in progress", err, store.ErrNotFound)
	wantErr(t, "Forget of a key in progress", st.Forget(ctx, "k"), store.ErrInProgress)
	if _, err := st.Complete(ctx, "k", tok, store.Record{Value: []byte("v")}, s.long()); err != nil {
		t.Fatal(err)
	}
	if err := st.Forget(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	_, err = st.Get(ctx, "k")
	wantErr(t, "Get after Forget", err, store.ErrNotFound)
	if res := s.claim(t, st, "k", "owner-2", s.long(), nil); res.Status != store.Claimed {
		t.Fatalf("claim after Forget = %v, want claimed", res.Status)
	}
}

func (s *suite) invalidArguments(t *testing.T) {
	st := s.h.New(t)
	for _, lease := range []time.Duration{0, -time.Second} {
		_, err := st.Claim(ctx, "k", store.ClaimRequest{Owner: "o", Lease: lease, TTL: s.long()})
		wantErr(t, fmt.Sprintf("Claim with lease %v", lease), err, store.ErrInvalidArgument)
		_, err = st.Claim(ctx, "k", store.ClaimRequest{Owner: "o", Lease: s.long(), TTL: lease})
		wantErr(t, fmt.Sprintf("Claim with ttl %v", lease), err, store.ErrInvalidArgument)
	}
	for _, d := range []time.Duration{store.MaxDuration + 1, 1<<63 - 1} {
		_, err := st.Claim(ctx, "k", store.ClaimRequest{Owner: "o", Lease: s.long(), TTL: d})
		wantErr(t, fmt.Sprintf("Claim with ttl %v", d), err, store.ErrInvalidArgument)
		_, err = st.Claim(ctx, "k", store.ClaimRequest{Owner: "o", Lease: d, TTL: s.long()})
		wantErr(t, fmt.Sprintf("Claim with lease %v", d), err, store.ErrInvalidArgument)
	}
	_, err := st.Claim(ctx, "k", store.ClaimRequest{Lease: s.long(), TTL: s.long()})
	wantErr(t, "Claim without an owner", err, store.ErrInvalidArgument)
	tok := s.mustClaim(t, st, "k", "o", s.long())
	_, err = st.Complete(ctx, "k", tok, store.Record{}, 0)
	wantErr(t, "Complete with ttl 0", err, store.ErrInvalidArgument)
	wantErr(t, "Renew with lease 0", st.Renew(ctx, "k", tok, 0), store.ErrInvalidArgument)
	wantErr(t, "Renew past MaxDuration", st.Renew(ctx, "k", tok, store.MaxDuration+1), store.ErrInvalidArgument)
	_, err = st.Complete(ctx, "k", tok, store.Record{}, store.MaxDuration+1)
	wantErr(t, "Complete past MaxDuration", err, store.ErrInvalidArgument)
	for _, key := range []string{"", "a\x00b", strings.Repeat("x", store.MaxKeyLen+1)} {
		_, err := st.Claim(ctx, key, store.ClaimRequest{Owner: "o", Lease: s.long(), TTL: s.long()})
		wantErr(t, fmt.Sprintf("Claim(%.20q)", key), err, store.ErrInvalidKey)
		_, err = st.Get(ctx, key)
		wantErr(t, fmt.Sprintf("Get(%.20q)", key), err, store.ErrInvalidKey)
	}
	// Nothing above may have touched the key.
	if res := s.claim(t, st, "k", "o", s.long(), nil); res.Status != store.Claimed || res.Token != tok {
		t.Fatalf("key changed by rejected calls: %v %+v", res.Status, res.Token)
	}
}

// The longest lease and TTL work like any other: no overflow makes a claim
// born expired.
func (s *suite) longestDurations(t *testing.T) {
	st := s.h.New(t)
	first, err := st.Claim(ctx, "k", store.ClaimRequest{Owner: "a", Lease: store.MaxDuration, TTL: store.MaxDuration})
	if err != nil || first.Status != store.Claimed {
		t.Fatalf("claim with the longest lease and TTL: %v %v", first.Status, err)
	}
	second := s.claim(t, st, "k", "b", s.long(), nil)
	if second.Status != store.InProgress {
		t.Fatalf("second claim: %v, want in-progress", second.Status)
	}
	rec, err := st.Complete(ctx, "k", first.Token, store.Record{Value: []byte("v")}, store.MaxDuration)
	if err != nil || !rec.ExpiresAt.After(time.Now().Add(99*365*24*time.Hour)) {
		t.Fatalf("complete with the longest TTL: %+v %v", rec, err)
	}
}

func (s *suite) oddKeys(t *testing.T) {
	st := s.h.New(t)
	keys := []string{"a:b", "a", "a:b:", "{tag}", "}{", "ключ", "emoji-🔑", "sp ace", "new\nline",
		"\xff\xfe", strings.Repeat("k", store.MaxKeyLen), store.BuildKey("1", store.Scope{Namespace: "a:b"}),
		store.BuildKey("b:1", store.Scope{Namespace: "a"})}
	toks := make([]store.Token, len(keys))
	for i, k := range keys {
		toks[i] = s.mustClaim(t, st, k, "o", s.long())
	}
	for i, k := range keys {
		if _, err := st.Complete(ctx, k, toks[i], store.Record{Value: []byte(k)}, s.long()); err != nil {
			t.Fatalf("Complete(%.30q): %v", k, err)
		}
	}
	for _, k := range keys {
		got, err := st.Get(ctx, k)
		if err != nil || string(got.Value) != k {
			t.Fatalf("Get(%.30q) = %.30q, %v: keys collided or were mangled", k, got.Value, err)
		}
	}
}

func (s *suite) concurrentClaims(t *testing.T) {
	st := s.h.New(t)
	const n = 32
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[store.Status]int{}
	errs := 0
	for i := range n {
		wg.Go(func() {
			res, err := st.Claim(ctx, "hot", store.ClaimRequest{Owner: fmt.Sprint("owner-", i), Lease: s.long(), TTL: s.long()})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs++
				return
			}
			counts[res.Status]++
		})
	}
	wg.Wait()
	if errs > 0 || counts[store.Claimed] != 1 || counts[store.InProgress] != n-1 {
		t.Fatalf("%d concurrent claims: %v, %d errors; want exactly one claimed", n, counts, errs)
	}
}

func (s *suite) batch(t *testing.T) {
	st := s.h.New(t)
	ops := []*store.Op{
		{Kind: store.OpClaim, Key: "b1", Claim: store.ClaimRequest{Owner: "a", Lease: s.long(), TTL: s.long()}},
		{Kind: store.OpClaim, Key: "b1", Claim: store.ClaimRequest{Owner: "b", Lease: s.long(), TTL: s.long()}},
		{Kind: store.OpClaim, Key: "b2", Claim: store.ClaimRequest{Owner: "a", Lease: s.long(), TTL: s.long()}},
		{Kind: store.OpGet, Key: "b3"},
		{Kind: store.OpClaim, Key: "", Claim: store.ClaimRequest{Owner: "a", Lease: s.long(), TTL: s.long()}},
	}
	store.Run(ctx, st, ops)
	if ops[0].Err != nil || ops[0].Result.Status != store.Claimed {
		t.Fatalf("op 0: %v %v", ops[0].Result.Status, ops[0].Err)
	}
	if ops[1].Err != nil || ops[1].Result.Status != store.InProgress {
		t.Fatalf("op 1 (same key, later in the batch): %v %v", ops[1].Result.Status, ops[1].Err)
	}
	if ops[2].Err != nil || ops[2].Result.Status != store.Claimed {
		t.Fatalf("op 2: %v %v", ops[2].Result.Status, ops[2].Err)
	}
	wantErr(t, "op 3", ops[3].Err, store.ErrNotFound)
	wantErr(t, "op 4 (bad key in a batch)", ops[4].Err, store.ErrInvalidKey)
	fin := []*store.Op{
		{Kind: store.OpComplete, Key: "b1", Token: ops[0].Result.Token, Record: store.Record{Value: []byte("one")}, TTL: s.long()},
		{Kind: store.OpRelease, Key: "b2", Token: ops[2].Result.Token},
		{Kind: store.OpRenew, Key: "b2", Token: ops[2].Result.Token, Lease: s.long()},
	}
	store.Run(ctx, st, fin)
	if fin[0].Err != nil || string(fin[0].Result.Record.Value) != "one" {
		t.Fatalf("complete in a batch: %q %v", fin[0].Result.Record.Value, fin[0].Err)
	}
	if fin[1].Err != nil {
		t.Fatalf("fail in a batch: %v", fin[1].Err)
	}
	wantErr(t, "renew after the release, same batch", fin[2].Err, store.ErrLeaseLost)
}

func (s *suite) waker(t *testing.T) {
	st := s.h.New(t)
	w, ok := st.(store.Waker)
	if !ok {
		t.Skip("store does not implement store.Waker")
	}
	woken := make(chan string, 16)
	id, stop, err := w.Subscribe(ctx, func(key string) {
		if key != "" {
			woken <- key
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, finish := range []string{"complete", "release"} {
		key := "wake-" + finish
		tok := s.mustClaim(t, st, key, "owner-1", s.long())
		res, err := st.Claim(ctx, key, store.ClaimRequest{Owner: "owner-2", Lease: s.long(), TTL: s.long(), Waiter: id})
		if err != nil || res.Status != store.InProgress {
			t.Fatalf("waiter claim: %v %v", res.Status, err)
		}
		if finish == "complete" {
			_, err = st.Complete(ctx, key, tok, store.Record{}, s.long())
		} else {
			err = st.Release(ctx, key, tok)
		}
		if err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-woken:
			if got != key {
				t.Fatalf("woken for %q, want %q", got, key)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no wake-up for %s within 10s", finish)
		}
	}
	// Nobody registered: no wake-up.
	tok := s.mustClaim(t, st, "quiet", "owner-1", s.long())
	if _, err := st.Complete(ctx, "quiet", tok, store.Record{}, s.long()); err != nil {
		t.Fatal(err)
	}
	stop()
	tok = s.mustClaim(t, st, "after-stop", "owner-1", s.long())
	if _, err := st.Claim(ctx, "after-stop", store.ClaimRequest{Owner: "owner-2", Lease: s.long(), TTL: s.long(), Waiter: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Complete(ctx, "after-stop", tok, store.Record{}, s.long()); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-woken:
		if got == "quiet" || got == "after-stop" {
			t.Fatalf("unexpected wake-up for %q", got)
		}
	case <-time.After(50 * time.Millisecond):
	}
}
