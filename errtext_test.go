package idem_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// Error strings name the package once ("idem: key ...: fingerprint
// mismatch", never "...: idem: fingerprint mismatch"), and a long key is
// cut, with its length, in every error that names it.
func TestErrorTextNamesThePrefixOnceAndCutsLongKeys(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	rt := idemtest.Runtime(t, idem.Options{Store: mem})
	long := store.BuildKey(strings.Repeat("o", 900), store.Scope{Namespace: "acme", Version: "v1"})
	check := func(what string, err error, sentinel error, wantLong bool) {
		t.Helper()
		if !errors.Is(err, sentinel) {
			t.Fatalf("%s: %v, want %v", what, err, sentinel)
		}
		msg := err.Error()
		if n := strings.Count(msg, "idem: "); n != 1 {
			t.Errorf("%s: %q names the prefix %d times", what, msg, n)
		}
		if wantLong && (len(msg) > 400 || !strings.Contains(msg, `"... (900 bytes) (namespace "acme", version "v1")`)) {
			t.Errorf("%s: the long key is not cut: %q", what, msg)
		}
	}
	for _, key := range []string{"short", long} {
		if _, err := idem.Do(bg, rt, key, idemtest.Value("v"), idem.WithFingerprint([]byte("a"))); err != nil {
			t.Fatal(err)
		}
		_, err := idem.Do(bg, rt, key, idemtest.MustNotRun(t), idem.WithFingerprint([]byte("b")))
		check("mismatch of "+key[:5], err, idem.ErrFingerprintMismatch, key == long)
		_, err = idem.Get[string](bg, rt, key+"-absent")
		check("absent", err, idem.ErrNotFound, false)
	}
	if want := `idem: key "short": fingerprint mismatch`; true {
		_, err := idem.Do(bg, rt, "short", idemtest.MustNotRun(t), idem.WithFingerprint([]byte("b")))
		if err.Error() != want {
			t.Errorf("mismatch: %q, want %q", err, want)
		}
	}

	g := idemtest.NewGate()
	ch := idemtest.GoDo(bg, rt, long+"-busy", g.Fn("v", nil))
	<-g.Started
	_, err := idem.Do(bg, rt, long+"-busy", idemtest.MustNotRun(t), idem.WithFailFast())
	check("conflict", err, idem.ErrConflict, false)
	if !strings.Contains(err.Error(), "... (905 bytes)") {
		t.Errorf("conflict: %q", err)
	}
	close(g.Open)
	<-ch

	small := idemtest.Runtime(t, idem.Options{Store: mem, MaxResultBytes: 8})
	_, err = idem.Do(bg, small, long+"-big", func(context.Context) (string, error) { return strings.Repeat("x", 100), nil })
	check("too large", err, idem.ErrResultTooLarge, false)
	other := idemtest.Runtime(t, idem.Options{Store: mem})
	_, err = idem.Do(bg, other, long+"-big", idemtest.MustNotRun(t))
	check("too large, replayed", err, idem.ErrResultTooLarge, false)
	var ce *idem.CodecError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "... (904 bytes)") {
		t.Errorf("too large, replayed: %#v", err)
	}
}
