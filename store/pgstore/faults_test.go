package pgstore_test

import (
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/pgtest"
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

// PostgreSQL goes away for longer than the lease while fn runs, paused or
// stopped as `pg_ctl stop -m immediate` does and started again on the same
// port (it acknowledges a commit only once it is written, and syncs it:
// fsync on, as in production); see storesuite.OutageLongerThanLease.
func TestOutageLongerThanLease(t *testing.T) {
	const lease = time.Second
	for _, c := range []struct {
		name   string
		outage func(t *testing.T, srv *pgtest.Server) storesuite.Outage
	}{
		{"paused", func(_ *testing.T, srv *pgtest.Server) storesuite.Outage {
			return storesuite.Outage{Down: srv.Pause, Up: srv.Resume}
		}},
		{"stopped", func(t *testing.T, srv *pgtest.Server) storesuite.Outage {
			return storesuite.Outage{Down: srv.StopImmediate, Up: func() {
				if err := srv.Restart(); err != nil {
					t.Fatal(err)
				}
			}}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := pgtest.Start(t, pgtest.Options{Durable: true, Settings: []string{"fsync=on"}})
			dsn, table := srv.DSN("postgres"), newTable()
			var fsync string
			if err := newPool(t, dsn).QueryRow(bg, "SHOW fsync").Scan(&fsync); err != nil || fsync != "on" {
				t.Fatalf("fsync = %q, %v; want on", fsync, err)
			}
			rt := newRuntime(t, idem.Options{Store: instance(t, dsn, table),
				Policy: idem.Policy{Lease: lease, TTL: time.Hour}, StoreTimeout: time.Second})
			storesuite.OutageLongerThanLease(t, rt, lease, c.outage(t, srv), func() *idem.Runtime {
				return newRuntime(t, idem.Options{Store: instance(t, dsn, table)})
			})
		})
	}
}

// PostgreSQL is paused for 20s while an owner runs, with default settings
// (a lease of 60s, early takeover on): nobody takes its key over, though
// its liveness row ended in the pause; see storesuite.OutageKeepsLiveOwner.
func TestOutageKeepsLiveOwner(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t, pgtest.Options{})
	dsn, table := srv.DSN("postgres"), newTable()
	a := newRuntime(t, idem.Options{Store: instance(t, dsn, table)})
	b := newRuntime(t, idem.Options{Store: instance(t, dsn, table)})
	storesuite.OutageKeepsLiveOwner(t, a, b, storesuite.Outage{Down: srv.Pause, Up: srv.Resume})
}
