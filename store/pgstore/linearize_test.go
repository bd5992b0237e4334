package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem/internal/pgtest"
	"github.com/idemrt/idem/store/pgstore"
	"github.com/idemrt/idem/store/storetest"
)

// Concurrent histories against a real PostgreSQL, checked for
// linearizability with porcupine (storetest.Linearizable). Leases and TTLs
// outlive every history: expiry is covered on memstore's fake clock.

// linearHarness is harness with a Unit of a second: on a real clock the
// check uses the Unit only as its tolerance for the times the store
// reports.
func linearHarness(pool *pgxpool.Pool) storetest.Harness {
	h := harness(pool)
	h.Unit = time.Second
	return h
}

// unknownOutcome: a call that failed for any reason but a corrupt row (a
// deadline, a dropped connection, a server shutting down) may have taken
// effect.
func unknownOutcome(err error) bool {
	var corrupt *pgstore.CorruptError
	return !errors.As(err, &corrupt)
}

func TestLinearizable(t *testing.T) {
	t.Parallel()
	storetest.Linearizable(t, linearHarness(sharedPool(t)), storetest.LinearOptions{Clients: 5, Keys: 3, Ops: 60, Histories: 8})
}

// The server is stopped (SIGSTOP) three times during each history, for
// 150ms, 400ms and 150ms: calls time out, and those sent while it is
// stopped run when it resumes, after their callers gave up on them.
func TestLinearizablePaused(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t, pgtest.Options{})
	pool := newPool(t, srv.DSN("postgres"))
	st := storetest.Linearizable(t, linearHarness(pool), storetest.LinearOptions{
		Clients: 5, Keys: 3, Ops: 40, Histories: 3, Think: time.Millisecond,
		OpTimeout: 300 * time.Millisecond, Indefinite: unknownOutcome,
		Fault: func(testing.TB) {
			for _, d := range []time.Duration{150, 400, 150} {
				time.Sleep(30 * time.Millisecond)
				srv.Pause()
				time.Sleep(d * time.Millisecond)
				srv.Resume()
			}
		},
	})
	if st.Unknown == 0 {
		t.Error("no call was left of unknown outcome: the pause missed the histories")
	}
}

// The server is killed, stays down for 300ms and is restarted (it
// acknowledges a commit only once it is written) in the middle of each
// history.
func TestLinearizableRestarted(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t, pgtest.Options{Durable: true})
	pool := newPool(t, srv.DSN("postgres"))
	st := storetest.Linearizable(t, linearHarness(pool), storetest.LinearOptions{
		Clients: 5, Keys: 3, Ops: 40, Histories: 3, Think: time.Millisecond,
		OpTimeout: 500 * time.Millisecond, Indefinite: unknownOutcome,
		Fault: func(t testing.TB) {
			time.Sleep(20 * time.Millisecond)
			srv.Kill()
			time.Sleep(300 * time.Millisecond)
			if err := srv.Restart(); err != nil {
				t.Error(err)
			}
		},
	})
	if st.Unknown == 0 {
		t.Error("no call was left of unknown outcome: the restart missed the histories")
	}
}
