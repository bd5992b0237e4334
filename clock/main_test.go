package clock_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind (a real timer's
// callback, or a test's own helper).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitLimit bounds every wait for another goroutine; reaching it means the
// test has already failed.
const waitLimit = 10 * time.Second

// returnsWithin runs f on its own goroutine and fails the test if f has not
// returned within waitLimit (a deadlock in the code under test).
func returnsWithin(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatalf("timed out after %v waiting for %s", waitLimit, what)
	}
}
