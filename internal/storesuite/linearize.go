package storesuite

import (
	"testing"
	"time"

	"github.com/idemrt/idem/store/storetest"
)

// LinearFaults is how the linearizability checks under faults reach the
// store and its server.
type LinearFaults struct {
	// Harness makes stores on the server, on connections that give up on
	// a reply soon, so that a server that stops answering yields calls of
	// unknown outcome within a history.
	Harness storetest.Harness
	// OpTimeout bounds each call.
	OpTimeout time.Duration
	// Indefinite tells the errors of calls that may have taken effect.
	Indefinite func(error) bool
}

func (f LinearFaults) options(fault func(testing.TB)) storetest.LinearOptions {
	return storetest.LinearOptions{
		Clients: 5, Keys: 3, Ops: 40, Histories: 3, Think: time.Millisecond,
		OpTimeout: f.OpTimeout, Indefinite: f.Indefinite, Fault: fault,
	}
}

// LinearizablePaused checks histories during which srv is stopped
// (SIGSTOP) three times, for 150ms, 400ms and 150ms: calls time out, and
// those sent while it is stopped run when it resumes, after their callers
// gave up on them. Some call must be left of unknown outcome.
func LinearizablePaused(t *testing.T, f LinearFaults, srv Pauser) {
	st := storetest.Linearizable(t, f.Harness, f.options(func(testing.TB) {
		for _, d := range []time.Duration{150, 400, 150} {
			time.Sleep(30 * time.Millisecond)
			srv.Pause()
			time.Sleep(d * time.Millisecond)
			srv.Resume()
		}
	}))
	if st.Unknown == 0 {
		t.Error("no call was left of unknown outcome: the pause missed the histories")
	}
}

// LinearizableRestarted checks histories in the middle of which the server
// is killed (kill), stays down for 300ms and is restarted (restart; it
// keeps every write it acknowledged). Some call must be left of unknown
// outcome.
func LinearizableRestarted(t *testing.T, f LinearFaults, kill func(), restart func(testing.TB)) {
	o := f.options(func(t testing.TB) {
		time.Sleep(20 * time.Millisecond)
		kill()
		time.Sleep(300 * time.Millisecond)
		restart(t)
	})
	// A restart leaves far more calls of unknown outcome than a pause
	// (every call in flight until the server is back), and porcupine's
	// search grows with them: shorter histories over more keys keep its
	// check within its time on a loaded machine.
	o.Ops, o.Keys = 25, 4
	st := storetest.Linearizable(t, f.Harness, o)
	if st.Unknown == 0 {
		t.Error("no call was left of unknown outcome: the restart missed the histories")
	}
}
