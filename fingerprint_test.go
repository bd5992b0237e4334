package idem_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemrt/idem"
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
		rt := newRuntime(t, idem.Options{})
		g := newGate()
		owner := goDo(bg, rt, "k", g.fn("A's result", nil), fpA)
		<-g.started
		_, err := idem.Do(bg, rt, "k", mustNotRun(t), fpB)
		wantMismatch(t, "in flight", err)
		same := goDo(bg, rt, "k", mustNotRun(t), fpA)
		waitersAre(t, rt, 1)
		close(g.open)
		recv(t, owner)
		if r := recv(t, same); r.err != nil || r.v != "A's result" {
			t.Fatalf("same fingerprint: %+v", r)
		}
	})
	t.Run("LRU hit", func(t *testing.T) {
		rt := newRuntime(t, idem.Options{})
		if _, err := idem.Do(bg, rt, "k", value("A's result"), fpA); err != nil {
			t.Fatal(err)
		}
		_, err := idem.Do(bg, rt, "k", mustNotRun(t), fpB)
		wantMismatch(t, "LRU hit", err)
		for _, opts := range [][]idem.CallOption{{fpA}, nil} {
			if v, err := idem.Do(bg, rt, "k", mustNotRun(t), opts...); err != nil || v != "A's result" {
				t.Fatalf("matching or absent fingerprint: %q %v", v, err)
			}
		}
	})
	t.Run("store", func(t *testing.T) {
		rt := newRuntime(t, idem.Options{DisableCache: true})
		if _, err := idem.Do(bg, rt, "k", value("A's result"), fpA); err != nil {
			t.Fatal(err)
		}
		_, err := idem.Do(bg, rt, "k", mustNotRun(t), fpB)
		wantMismatch(t, "store replay", err)
	})
	t.Run("claiming", func(t *testing.T) {
		// B parks while A's claim is out, before the holder is known.
		fs := &faultStore{Store: memStore(nil), claimGate: make(chan struct{})}
		rt := newRuntime(t, idem.Options{Store: fs, Shards: 1})
		a := goDo(bg, rt, "k", value("A's result"), fpA)
		eventually(t, "claim in flight", func() bool { return rt.Stats().InFlight == 1 })
		b := goDo(bg, rt, "k", mustNotRun(t), fpB)
		waitersAre(t, rt, 1)
		close(fs.claimGate)
		wantMismatch(t, "parked while claiming", recv(t, b).err)
		if r := recv(t, a); r.err != nil {
			t.Fatal(r.err)
		}
	})
	t.Run("hand-off wake-up", func(t *testing.T) {
		// The owner had no fingerprint; the waiter handed the key brings A,
		// and a waiter with B is woken with a mismatch.
		rt := newRuntime(t, idem.Options{})
		g := newGate()
		owner := goDo(bg, rt, "k", g.fn("", errTransient))
		<-g.started
		a := goDo(bg, rt, "k", value("A's result"), fpA)
		waitersAre(t, rt, 1)
		b := goDo(bg, rt, "k", mustNotRun(t), fpB)
		waitersAre(t, rt, 2)
		close(g.open)
		recv(t, owner)
		if r := recv(t, a); r.err != nil || r.out != idem.Executed {
			t.Fatalf("A: %+v", r)
		}
		wantMismatch(t, "woken by a hand-off", recv(t, b).err)
	})
	t.Run("remote wake-up", func(t *testing.T) {
		// B waits on a key held by another instance, which then completes
		// it for a request with fingerprint C.
		st := memStore(nil)
		rt := newRuntime(t, idem.Options{Store: st, DisableCache: true})
		other, err := st.Claim(bg, "k", store.ClaimRequest{Owner: "other", Lease: time.Hour, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		b := goDo(bg, rt, "k", mustNotRun(t), fpB)
		waitersAre(t, rt, 1)
		if _, err := st.Complete(bg, "k", other.Token, store.Record{Value: []byte(`"C's result"`), Fingerprint: []byte("C")}, time.Hour); err != nil {
			t.Fatal(err)
		}
		wantMismatch(t, "woken from another instance", recv(t, b).err)
	})
}
