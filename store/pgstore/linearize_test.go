package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem/internal/pgtest"
	"github.com/idemrt/idem/internal/storesuite"
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

// linearFaults runs the fault checks on srv.
func linearFaults(t testing.TB, srv *pgtest.Server, opTimeout time.Duration) storesuite.LinearFaults {
	return storesuite.LinearFaults{Harness: linearHarness(newPool(t, srv.DSN("postgres"))), OpTimeout: opTimeout, Indefinite: unknownOutcome}
}

// The server is paused during each history; see
// storesuite.LinearizablePaused.
func TestLinearizablePaused(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t, pgtest.Options{})
	storesuite.LinearizablePaused(t, linearFaults(t, srv, 300*time.Millisecond), srv)
}

// The server is killed and restarted (it acknowledges a commit only once
// it is written) in the middle of each history; see
// storesuite.LinearizableRestarted.
func TestLinearizableRestarted(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t, pgtest.Options{Durable: true})
	storesuite.LinearizableRestarted(t, linearFaults(t, srv, 500*time.Millisecond), srv.Kill, func(t testing.TB) {
		if err := srv.Restart(); err != nil {
			t.Error(err)
		}
	})
}
