// Package idemtest holds the test helpers the packages of this module
// share: a runtime closed at the end of the test, and a bounded wait.
package idemtest

import (
	"context"
	"testing"
	"time"

	"github.com/idemrt/idem"
)

// Runtime starts a runtime with opts that the test closes at its end,
// failing the test if Close does not finish within 15s.
func Runtime(t testing.TB, opts idem.Options) *idem.Runtime {
	t.Helper()
	rt, err := idem.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("runtime Close: %v", err)
		}
	})
	return rt
}

// Eventually waits until cond holds, failing the test after 20s.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
