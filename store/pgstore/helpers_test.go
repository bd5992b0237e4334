package pgstore_test

import (
	"testing"

	"github.com/idemrt/idem/internal/pgtest"
)

// startServer starts a server of the test's own, for a test that kills,
// pauses or restarts it; durable keeps every commit it acknowledged
// across a kill.
func startServer(t testing.TB, durable bool) *pgtest.Server {
	t.Helper()
	return pgtest.Start(t, pgtest.Options{Durable: durable})
}
