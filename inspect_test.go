package idem_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// Reading a key without running it: Get (the result, as Do would replay
// it) and Runtime.State (where the key is in its lifecycle).

// brokenInspector is a memstore whose Inspect fails as a store that is
// down does.
type brokenInspector struct{ *memstore.Store }

var errDown = errors.New("connection refused")

func (brokenInspector) Inspect(context.Context, string) (store.Entry, error) {
	return store.Entry{}, errDown
}

func TestGetAbsentCompletedFailed(t *testing.T) {
	for _, disable := range []bool{false, true} {
		rt := idemtest.Runtime(t, idem.Options{DisableCache: disable})
		if _, err := idem.Get[string](bg, rt, "k"); !errors.Is(err, idem.ErrNotFound) || errors.Is(err, idem.ErrInProgress) {
			t.Fatalf("absent key: %v, want ErrNotFound", err)
		}
		if _, err := idem.Do(bg, rt, "k", idemtest.Value("v")); err != nil {
			t.Fatal(err)
		}
		if v, err := idem.Get[string](bg, rt, "k"); err != nil || v != "v" {
			t.Fatalf("completed key (cache disabled=%v): %q %v", disable, v, err)
		}
		declined := errors.New("card declined")
		_, doErr := idem.Do(bg, rt, "p", func(context.Context) (string, error) { return "", idem.Permanent(declined) })
		_, getErr := idem.Get[string](bg, rt, "p")
		if getErr == nil || getErr.Error() != doErr.Error() || !idem.IsPermanent(getErr) {
			t.Fatalf("permanent error: Get %v, Do %v", getErr, doErr)
		}
		// As Do replays it: from the store a *ReplayedError; the original
		// once the shard has cached it.
		var re *idem.ReplayedError
		if disable && (!errors.As(getErr, &re) || errors.Is(getErr, declined)) {
			t.Fatalf("from the store: Get's error %#v", getErr)
		}
		if !disable {
			idemtest.Eventually(t, "the original error from the cache", func() bool {
				_, err := idem.Get[string](bg, rt, "p")
				return errors.Is(err, declined)
			})
		}
	}
}

func TestGetInProgress(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	rt := idemtest.Runtime(t, idem.Options{Store: mem})
	other := idemtest.Runtime(t, idem.Options{Store: mem})
	g := idemtest.NewGate()
	ch := idemtest.GoDo(bg, rt, "k", g.Fn("v", nil))
	<-g.Started
	for name, r := range map[string]*idem.Runtime{"holder": rt, "other instance": other} {
		if _, err := idem.Get[string](bg, r, "k"); !errors.Is(err, idem.ErrInProgress) || errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("%s: Get of a key in progress: %v, want ErrInProgress", name, err)
		}
	}
	close(g.Open)
	if r := idemtest.Recv(t, ch); r.Err != nil {
		t.Fatal(r.Err)
	}
	if v, err := idem.Get[string](bg, other, "k"); err != nil || v != "v" {
		t.Fatalf("after the run: %q %v", v, err)
	}
}

// Without store.Inspector, Get cannot tell a key in progress in another
// instance from an absent one (store.Get answers ErrNotFound for both),
// and State refuses. A key in flight here is in progress all the same.
func TestGetWithoutInspector(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	rt := idemtest.Runtime(t, idem.Options{Store: plainStore{mem}})
	other := idemtest.Runtime(t, idem.Options{Store: plainStore{mem}})
	g := idemtest.NewGate()
	ch := idemtest.GoDo(bg, rt, "k", g.Fn("v", nil))
	<-g.Started
	if _, err := idem.Get[string](bg, other, "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("in progress in another instance, without Inspector: %v, want ErrNotFound", err)
	}
	if _, err := idem.Get[string](bg, rt, "k"); !errors.Is(err, idem.ErrInProgress) {
		t.Errorf("in progress here, without Inspector: %v, want ErrInProgress", err)
	}
	if _, err := rt.State(bg, "k"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("State without Inspector: %v, want errors.ErrUnsupported", err)
	}
	close(g.Open)
	idemtest.Recv(t, ch)
	if v, err := idem.Get[string](bg, rt, "k", idem.WithFailFast()); err != nil || v != "v" {
		t.Fatalf("completed: %q %v", v, err)
	}
}

// A key in progress whose holder's fingerprint differs from the caller's:
// Get says ErrFingerprintMismatch, as Do does, here and in another
// instance; with the same fingerprint, or none, it is in progress.
func TestGetInProgressFingerprint(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	rt := idemtest.Runtime(t, idem.Options{Store: mem})
	other := idemtest.Runtime(t, idem.Options{Store: mem})
	g := idemtest.NewGate()
	ch := idemtest.GoDo(bg, rt, "k", g.Fn("v", nil), idem.WithFingerprint([]byte("a")))
	<-g.Started
	for name, r := range map[string]*idem.Runtime{"holder": rt, "other instance": other} {
		_, doErr := idem.Do(bg, r, "k", idemtest.MustNotRun(t), idem.WithFingerprint([]byte("b")), idem.WithFailFast())
		_, getErr := idem.Get[string](bg, r, "k", idem.WithFingerprint([]byte("b")))
		if !errors.Is(doErr, idem.ErrFingerprintMismatch) || !errors.Is(getErr, idem.ErrFingerprintMismatch) {
			t.Errorf("%s: another fingerprint: Do %v, Get %v; want ErrFingerprintMismatch from both", name, doErr, getErr)
		}
		for _, opts := range [][]idem.CallOption{{idem.WithFingerprint([]byte("a"))}, nil} {
			if _, err := idem.Get[string](bg, r, "k", opts...); !errors.Is(err, idem.ErrInProgress) {
				t.Errorf("%s: the holder's fingerprint, or none: %v, want ErrInProgress", name, err)
			}
		}
	}
	close(g.Open)
	if r := idemtest.Recv(t, ch); r.Err != nil {
		t.Fatal(r.Err)
	}
}

// A key this runtime has admitted, whose claim has not reached the store
// yet, is in progress here, for Get as for State (HeldHere), with the
// claiming call's fingerprint; another instance sees it absent until the
// claim lands.
func TestGetClaimOnItsWay(t *testing.T) {
	st := newPausable()
	rt := idemtest.Runtime(t, idem.Options{Store: st})
	other := idemtest.Runtime(t, idem.Options{Store: st.mem})
	st.pauseNext(store.OpClaim)
	ch := idemtest.GoDo(bg, rt, "k", idemtest.Value("v"), idem.WithFingerprint([]byte("a")), idem.WithLease(time.Minute))
	st.waitPaused(t, store.OpClaim)
	if _, err := idem.Get[string](bg, rt, "k"); !errors.Is(err, idem.ErrInProgress) {
		t.Errorf("Get here: %v, want ErrInProgress", err)
	}
	if _, err := idem.Get[string](bg, rt, "k", idem.WithFingerprint([]byte("b"))); !errors.Is(err, idem.ErrFingerprintMismatch) {
		t.Errorf("Get here, another fingerprint: %v, want ErrFingerprintMismatch", err)
	}
	if s, err := rt.State(bg, "k"); err != nil || s.Status != idem.KeyInProgress || !s.HeldHere || !s.Token.IsZero() ||
		s.LeaseLeft != time.Minute || !bytes.Equal(s.Fingerprint, []byte("a")) {
		t.Errorf("State here: %+v %v, want in progress, held here", s, err)
	}
	if _, err := idem.Get[string](bg, other, "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Get in another instance: %v, want ErrNotFound", err)
	}
	if s, err := other.State(bg, "k"); err != nil || s.Status != idem.KeyAbsent {
		t.Errorf("State in another instance: %+v %v, want absent", s, err)
	}
	st.resume <- struct{}{}
	if r := idemtest.Recv(t, ch); r.Err != nil || r.Out != idem.Executed {
		t.Fatalf("the call: %+v", r)
	}
}

func TestGetOptions(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{DisableCache: true})
	fp := idem.WithFingerprint([]byte("a"))
	if _, err := idem.Do(bg, rt, "k", idemtest.Value("v"), fp, idem.WithCodec(upperCodec{})); err != nil {
		t.Fatal(err)
	}
	// The options of a Do call serve a Get: those about running are ignored.
	v, err := idem.Get[string](bg, rt, "k", fp, idem.WithCodec(upperCodec{}), idem.WithTTL(time.Hour),
		idem.WithFailFast(), idem.WithLease(time.Minute), idem.WithoutRenewal(), idem.WithOwnerWaits())
	if err != nil || v != "v" {
		t.Fatalf("with the call's options: %q %v", v, err)
	}
	if _, err := idem.Get[string](bg, rt, "k", idem.WithFingerprint([]byte("b"))); !errors.Is(err, idem.ErrFingerprintMismatch) {
		t.Fatalf("another fingerprint: %v", err)
	}
	var ce *idem.CodecError
	if _, err := idem.Get[int](bg, rt, "k"); !errors.As(err, &ce) || ce.Op != "decode" {
		t.Fatalf("the wrong type: %v, want a decode *CodecError", err)
	}
	for name, opt := range map[string]idem.CallOption{"WithTTL(-1)": idem.WithTTL(-1), "WithCodec(nil)": idem.WithCodec(nil)} {
		if _, err := idem.Get[string](bg, rt, "k", opt); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Fatalf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

func TestGetAndStateRefuse(t *testing.T) {
	if _, err := idem.Get[string](bg, nil, "k"); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Fatalf("nil runtime: %v", err)
	}
	rt := idemtest.Runtime(t, idem.Options{})
	if _, err := idem.Get[string](bg, rt, ""); !errors.Is(err, idem.ErrInvalidKey) {
		t.Fatalf("empty key: %v", err)
	}
	if _, err := rt.State(bg, "a\x00b"); !errors.Is(err, idem.ErrInvalidKey) {
		t.Fatalf("NUL in key: %v", err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := idem.Get[string](ctx, rt, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ended context: %v", err)
	}
	broken := idemtest.Runtime(t, idem.Options{Store: brokenInspector{memstore.New(memstore.Options{})}})
	var se *idem.StoreError
	if _, err := idem.Get[string](bg, broken, "k"); !errors.As(err, &se) || !errors.Is(err, errDown) || se.Op != "inspect" {
		t.Fatalf("store down, Get: %v, want a *StoreError", err)
	}
	if _, err := broken.State(bg, "k"); !errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("store down, State: %v", err)
	}
	closed, err := idem.New(idem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := idem.Get[string](bg, closed, "k"); !errors.Is(err, idem.ErrClosed) {
		t.Fatalf("closed runtime, Get: %v", err)
	}
	if _, err := closed.State(bg, "k"); !errors.Is(err, idem.ErrClosed) {
		t.Fatalf("closed runtime, State: %v", err)
	}
}

func TestState(t *testing.T) {
	clk := idemtest.FakeClock()
	mem := memstore.New(memstore.Options{Clock: clk})
	rt := idemtest.Runtime(t, idem.Options{Store: mem, Clock: clk, Policy: idem.Policy{Lease: 30 * time.Second}})
	other := idemtest.Runtime(t, idem.Options{Store: mem, Clock: clk})

	if st, err := rt.State(bg, "k"); err != nil || st.Status != idem.KeyAbsent || st.Key != "k" {
		t.Fatalf("absent: %+v %v", st, err)
	}

	g := idemtest.NewGate()
	ch := idemtest.GoDo(bg, rt, "k", g.Fn("value", nil), idem.WithFingerprint([]byte("fp")), idem.WithTTL(time.Hour))
	<-g.Started
	clk.Advance(9 * time.Second) // short of the first renewal, a third of the lease in
	st, err := rt.State(bg, "k")
	if err != nil || st.Status != idem.KeyInProgress || !st.HeldHere || st.LeaseLeft != 21*time.Second ||
		st.Token.Fence == 0 || !bytes.Equal(st.Fingerprint, []byte("fp")) {
		t.Fatalf("in progress, seen by its holder: %+v %v", st, err)
	}
	if st, err := other.State(bg, "k"); err != nil || st.Status != idem.KeyInProgress || st.HeldHere {
		t.Fatalf("in progress, seen by another instance: %+v %v", st, err)
	}
	close(g.Open)
	if r := idemtest.Recv(t, ch); r.Err != nil {
		t.Fatal(r.Err)
	}
	fence := st.Token.Fence
	st, err = other.State(bg, "k")
	if err != nil || st.Status != idem.KeyCompleted || st.HeldHere || st.Token.Fence != fence ||
		!st.CreatedAt.Equal(clk.Now()) || !st.ExpiresAt.Equal(clk.Now().Add(time.Hour)) ||
		st.Size != len(`"value"`) || !bytes.Equal(st.Fingerprint, []byte("fp")) {
		t.Fatalf("completed: %+v %v", st, err)
	}

	_, _ = idem.Do(bg, rt, "p", func(context.Context) (string, error) { return "", idem.Permanent(errors.New("no")) })
	if st, err := rt.State(bg, "p"); err != nil || st.Status != idem.KeyFailed || st.Error != "no" || st.ErrorCode != "" || st.Size != 0 {
		t.Fatalf("failed: %+v %v", st, err)
	}

	// A claim whose holder died: in progress, no lease left.
	if _, err := mem.Claim(bg, "dead", store.ClaimRequest{Owner: "gone-1", Lease: time.Second, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	if st, err := rt.State(bg, "dead"); err != nil || st.Status != idem.KeyInProgress || st.LeaseLeft != 0 || st.HeldHere {
		t.Fatalf("lease ended: %+v %v", st, err)
	}
}

func TestKeyStatusString(t *testing.T) {
	for s, want := range map[idem.KeyStatus]string{idem.KeyAbsent: "absent", idem.KeyInProgress: "in-progress",
		idem.KeyCompleted: "completed", idem.KeyFailed: "failed", 9: "unknown"} {
		if s.String() != want {
			t.Errorf("%d: %q, want %q", s, s.String(), want)
		}
	}
}
