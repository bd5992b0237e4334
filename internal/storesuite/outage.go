package storesuite

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
)

// Outage is how a test takes its server away and brings it back: paused
// and resumed, or stopped and started again on the same port (keeping
// every write it acknowledged).
type Outage struct {
	Down func()
	Up   func()
}

// OutageLongerThanLease checks one runtime, rt, whose policy's lease is
// lease, and one server, away for longer than the lease while fn runs:
//
//   - fn is told to stop (its context ends with ErrLeaseLost) once the
//     lease may have ended by the runtime's clock, never before;
//   - fn returns a result anyway, while the server is still away; the
//     owner's call reports ErrStoreUnavailable (its result is not stored
//     yet), and a retry of the call waits;
//   - the server comes back: the runtime, which kept the result and offered
//     it again, stores it; the retry joins it, a later call replays it, and
//     so does a call on other, a second runtime on the same store;
//   - fn ran once.
func OutageLongerThanLease(t *testing.T, rt *idem.Runtime, lease time.Duration, o Outage, other func() *idem.Runtime) {
	t.Helper()
	var runs atomic.Int32
	started := make(chan context.Context, 1)
	ret := make(chan string, 1)
	t.Cleanup(func() {
		select {
		case ret <- "test over":
		default:
		}
	})
	fn := func(ctx context.Context) (string, error) {
		runs.Add(1)
		started <- ctx
		return <-ret, nil // its side effect is done: it returns whatever its context says
	}
	begin := time.Now()
	owner := idemtest.GoDo(bg, rt, "outage", fn)
	ctx := idemtest.Recv(t, started)

	o.Down()
	down := time.Now()
	idemtest.Recv(t, ctx.Done())
	if took := time.Since(begin); took < lease {
		t.Fatalf("fn told to stop %v after its call began, within its lease of %v", took, lease)
	}
	if !errors.Is(context.Cause(ctx), idem.ErrLeaseLost) {
		t.Fatalf("fn's context ended with %v, want ErrLeaseLost", context.Cause(ctx))
	}
	ret <- "A"
	if r := idemtest.Recv(t, owner); !errors.Is(r.Err, idem.ErrStoreUnavailable) {
		t.Fatalf("owner, with the server away: %+v, want ErrStoreUnavailable", r)
	}
	retry := idemtest.GoDo(bg, rt, "outage", idemtest.MustNotRun(t), idem.WithSettle(idemtest.Timeout))
	idemtest.Eventually(t, "the retry parked", func() bool { return rt.Stats().Waiters == 1 })
	// The outage lasts twice the lease at least: the result is offered
	// again well past the lease's end.
	time.Sleep(time.Until(down.Add(2 * lease)))
	o.Up()
	t.Logf("the server was away for %v (lease %v)", time.Since(down).Round(time.Millisecond), lease)

	if r := idemtest.Recv(t, retry); r.Err != nil || r.V != "A" || r.Out != idem.Joined {
		t.Fatalf("the retry that waited: %+v, want A joined", r)
	}
	var out idem.Outcome
	if v, err := idem.Do(bg, rt, "outage", idemtest.MustNotRun(t), idem.WithOutcome(&out)); err != nil || v != "A" || out != idem.Replayed {
		t.Fatalf("a later call: %q %v %v, want A replayed", v, err, out)
	}
	if v, err := idem.Do(bg, other(), "outage", idemtest.MustNotRun(t), idem.WithOutcome(&out)); err != nil || v != "A" || out != idem.Replayed {
		t.Fatalf("a call on another runtime: %q %v %v, want A replayed", v, err, out)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("fn ran %d times, want once", n)
	}
}
