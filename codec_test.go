package idem_test

import (
	"context"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store/memstore"
)

// A string result that is not valid UTF-8 is what its owner gets, but a
// process that replays it from the store gets U+FFFD for each invalid
// byte: encoding/json's rule, which idem.JSON documents.
func TestJSONReplayCoercesInvalidUTF8(t *testing.T) {
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	a := idemtest.Runtime(t, idem.Options{Store: st})
	b := idemtest.Runtime(t, idem.Options{Store: st})
	v, err := idem.Do(bg, a, "k", func(context.Context) (string, error) { return "a\xffb", nil })
	if err != nil || v != "a\xffb" {
		t.Fatalf("owner: %q, %v", v, err)
	}
	v, err = idem.Do(bg, b, "k", idemtest.MustNotRun(t))
	if err != nil || v != "a\uFFFDb" {
		t.Fatalf("replay in another process: %q, %v; want %q", v, err, "a\uFFFDb")
	}
}
