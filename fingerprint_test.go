package idem_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

var fpA, fpB = idem.WithFingerprint([]byte("A")), idem.WithFingerprint([]byte("B"))

func wantMismatch(t *testing.T, path string, err error) {
	t.Helper()
	if !errors.Is(err, idem.ErrFingerprintMismatch) {
		t.Fatalf("%s: err = %v, want ErrFingerprintMismatch", path, err)
	}
}

// A key reused with another fingerprint never replays the first request's
// result, whichever path answers.
func TestFingerprintEveryPath(t *testing.T) {
	t.Run("in flight", func(t *testing.T) {
		rt := idemtest.Runtime(t, idem.Options{})
		g := idemtest.NewGate()
		owner := idemtest.GoDo(bg, rt, "k", g.Fn("A's result", nil), fpA)
		<-g.Started
		_, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t), fpB)
		wantMismatch(t, "in flight", err)
		same := idemtest.GoDo(bg, rt, "k", idemtest.MustNotRun(t), fpA)
		waitersAre(t, rt, 1)
		close(g.Open)
		idemtest.Recv(t, owner)
		if r := idemtest.Recv(t, same); r.Err != nil || r.V != "A's result" {
			t.Fatalf("same fingerprint: %+v", r)
		}
	})
	t.Run("LRU hit", func(t *testing.T) {
		rt := idemtest.Runtime(t, idem.Options{})
		if _, err := idem.Do(bg, rt, "k", idemtest.Value("A's result"), fpA); err != nil {
			t.Fatal(err)
		}
		_, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t), fpB)
		wantMismatch(t, "LRU hit", err)
		for _, opts := range [][]idem.CallOption{{fpA}, nil} {
			if v, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t), opts...); err != nil || v != "A's result" {
				t.Fatalf("matching or absent fingerprint: %q %v", v, err)
			}
		}
	})
	t.Run("store", func(t *testing.T) {
		rt := idemtest.Runtime(t, idem.Options{DisableCache: true})
		if _, err := idem.Do(bg, rt, "k", idemtest.Value("A's result"), fpA); err != nil {
			t.Fatal(err)
		}
		_, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t), fpB)
		wantMismatch(t, "store replay", err)
	})
	t.Run("claiming", func(t *testing.T) {
		// B parks while A's claim is out, before the holder is known.
		fs := &faultStore{Store: memStore(nil), claimGate: make(chan struct{})}
		rt := idemtest.Runtime(t, idem.Options{Store: fs, Shards: 1})
		a := idemtest.GoDo(bg, rt, "k", idemtest.Value("A's result"), fpA)
		idemtest.Eventually(t, "claim in flight", func() bool { return rt.Stats().InFlight == 1 })
		b := idemtest.GoDo(bg, rt, "k", idemtest.MustNotRun(t), fpB)
		waitersAre(t, rt, 1)
		close(fs.claimGate)
		wantMismatch(t, "parked while claiming", idemtest.Recv(t, b).Err)
		if r := idemtest.Recv(t, a); r.Err != nil {
			t.Fatal(r.Err)
		}
	})
	t.Run("hand-off wake-up", func(t *testing.T) {
		// The owner had no fingerprint; the waiter handed the key brings A,
		// and a waiter with B is woken with a mismatch.
		rt := idemtest.Runtime(t, idem.Options{})
		g := idemtest.NewGate()
		owner := idemtest.GoDo(bg, rt, "k", g.Fn("", errTransient))
		<-g.Started
		a := idemtest.GoDo(bg, rt, "k", idemtest.Value("A's result"), fpA)
		waitersAre(t, rt, 1)
		b := idemtest.GoDo(bg, rt, "k", idemtest.MustNotRun(t), fpB)
		waitersAre(t, rt, 2)
		close(g.Open)
		idemtest.Recv(t, owner)
		if r := idemtest.Recv(t, a); r.Err != nil || r.Out != idem.Executed {
			t.Fatalf("A: %+v", r)
		}
		wantMismatch(t, "woken by a hand-off", idemtest.Recv(t, b).Err)
	})
	t.Run("remote wake-up", func(t *testing.T) {
		// B waits on a key held by another instance, which then completes
		// it for a request with fingerprint C.
		st := memStore(nil)
		rt := idemtest.Runtime(t, idem.Options{Store: st, DisableCache: true})
		other, err := st.Claim(bg, "k", store.ClaimRequest{Owner: "other", Lease: time.Hour, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		b := idemtest.GoDo(bg, rt, "k", idemtest.MustNotRun(t), fpB)
		waitersAre(t, rt, 1)
		if _, err := st.Complete(bg, "k", other.Token, store.Record{Value: []byte(`"C's result"`), Fingerprint: []byte("C")}, time.Hour); err != nil {
			t.Fatal(err)
		}
		wantMismatch(t, "woken from another instance", idemtest.Recv(t, b).Err)
	})
}
