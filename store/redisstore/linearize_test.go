package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/internal/storesuite"
	"github.com/idemrt/idem/store/redisstore"
	"github.com/idemrt/idem/store/storetest"
)

// Concurrent histories against real redis-server processes, checked for
// linearizability with porcupine (storetest.Linearizable). Leases and TTLs
// outlive every history: expiry is covered on memstore's fake clock.

// linearHarness is harness with a Unit of a second. On a real clock the
// check uses the Unit only as its tolerance for times the store reports (a
// record's life against its TTL, a lease left): a server descheduled in the
// middle of a script on a loaded machine shifts those by tens of
// milliseconds, which is no linearizability violation.
func linearHarness(client redis.UniversalClient) storetest.Harness {
	h := harness(client)
	h.Unit = time.Second
	return h
}

// unknownOutcome: a call that failed for any reason but a corrupt record
// (a timeout, a refused or reset connection, LOADING) may have taken effect.
func unknownOutcome(err error) bool {
	var corrupt *redisstore.CorruptError
	return !errors.As(err, &corrupt)
}

// linearClient gives up on a reply after 100ms, so that a server that stops
// answering yields calls of unknown outcome within a history. It keeps
// go-redis's default MaxRetries: the store's script calls are never re-sent
// by go-redis (a second copy, run after another client's call, would
// misreport the first one's effect), and the store repeats only the claims,
// renewals and gets whose repeat answers truly.
func linearClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 100 * time.Millisecond,
		ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestLinearizableSingle(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	storetest.Linearizable(t, linearHarness(newClient(t, srv)), storetest.LinearOptions{Clients: 5, Keys: 3, Ops: 60, Histories: 10})
}

func TestLinearizableCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	storetest.Linearizable(t, linearHarness(newClusterClient(t, cl)), storetest.LinearOptions{Clients: 5, Keys: 3, Ops: 60, Histories: 5})
}

// linearFaults runs the fault checks on srv through a linearClient.
func linearFaults(t testing.TB, srv *redistest.Server, opTimeout time.Duration) storesuite.LinearFaults {
	return storesuite.LinearFaults{Harness: linearHarness(linearClient(t, srv.Addr)), OpTimeout: opTimeout, Indefinite: unknownOutcome}
}

// The server is paused during each history; see
// storesuite.LinearizablePaused. (150ms, the shortest pause, is a read
// timeout plus the store's first repeat of a lost claim: both copies of a
// claim run at the resume.)
func TestLinearizablePaused(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	storesuite.LinearizablePaused(t, linearFaults(t, srv, 500*time.Millisecond), srv)
}

// The server is killed and restarted (with every write fsynced before it
// is acknowledged) in the middle of each history; see
// storesuite.LinearizableRestarted.
func TestLinearizableRestarted(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{Persist: true})
	storesuite.LinearizableRestarted(t, linearFaults(t, srv, 200*time.Millisecond), srv.Kill, func(testing.TB) { srv.Restart() })
}
