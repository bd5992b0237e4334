package pgstore_test

import (
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/storesuite"
	"github.com/idemrt/idem/store/pgstore"
)

// PostgreSQL is killed, stays down for half a second, and restarts (it
// acknowledges a commit only once it is written) in the middle of a run;
// see storesuite.RestartMidRun. Some caller must notice the outage.
func TestRestartMidRun(t *testing.T) {
	t.Parallel()
	srv := startServer(t, true)
	s := newStore(t, newPool(t, srv.DSN("postgres")), pgstore.Options{})
	rt := newRuntime(t, idem.Options{Store: s, Policy: idem.Policy{Lease: 2 * time.Second, Settle: 5 * time.Second}, StoreTimeout: time.Second})
	storesuite.RestartMidRun(t, rt, func() {
		srv.Kill()
		time.Sleep(500 * time.Millisecond) // down for longer than the store's repeats
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
	}, true)
}

// PostgreSQL is paused (SIGSTOP) past the callers' deadlines; see
// storesuite.Paused.
func TestPaused(t *testing.T) {
	t.Parallel()
	srv := startServer(t, false)
	s := newStore(t, newPool(t, srv.DSN("postgres")), pgstore.Options{})
	rt := newRuntime(t, idem.Options{Store: s, StoreTimeout: time.Second})
	storesuite.Paused(t, rt, srv)
}
