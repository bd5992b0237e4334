package mailbox_test

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test or example leaves a Worker
// goroutine (or any other goroutine) running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitLimit bounds every wait for another goroutine. It is generous: a test
// that needs it has already failed (a deadlock or a lost wake-up).
const waitLimit = 10 * time.Second

// goid returns the id of the calling goroutine, parsed from the first line of
// its stack trace ("goroutine 17 [running]:"). Tests use it only to tell
// goroutines apart.
func goid() uint64 {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	line := bytes.TrimPrefix(buf[:n], []byte("goroutine "))
	if i := bytes.IndexByte(line, ' '); i > 0 {
		line = line[:i]
	}
	id, err := strconv.ParseUint(string(line), 10, 64)
	if err != nil {
		panic("goid: cannot parse " + strconv.Quote(string(buf[:n])))
	}
	return id
}

// await fails the test if ch is not closed (or sent on) within waitLimit.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("timed out after %v waiting for %s", waitLimit, what)
	}
}

// returnsWithin runs f on its own goroutine and fails the test if it has not
// returned within waitLimit.
func returnsWithin(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	await(t, done, what)
}

func TestGoid(t *testing.T) {
	me := goid()
	if me == 0 {
		t.Fatal("goid returned 0")
	}
	if again := goid(); again != me {
		t.Fatalf("goid changed on the same goroutine: %d then %d", me, again)
	}
	other := make(chan uint64)
	go func() { other <- goid() }()
	if id := <-other; id == me {
		t.Fatalf("two goroutines share id %d", id)
	}
}

func timeAfterLimit() <-chan time.Time { return time.After(waitLimit) }
