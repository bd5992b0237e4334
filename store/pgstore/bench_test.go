package pgstore_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem/internal/storesuite"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
)

// Benchmarks on the tests' PostgreSQL (fsync off: they measure the
// protocol and the server's CPU, not a disk; docs/postgres.md has
// figures with fsync on). Compare the sub-benchmarks of one run
// (benchstat), not runs on different machines.

// BenchmarkClaimComplete: see storesuite.BenchClaimComplete. The runtime
// sends one batch, one transaction, per shard in flight; "plain" calls the
// store's operations directly, one statement per round trip.
func BenchmarkClaimComplete(b *testing.B) {
	pool := poolWith(b, shared.DSN("postgres"), func(c *pgxpool.Config) { c.MaxConns = 64 })
	storesuite.BenchClaimComplete(b, func(t testing.TB) store.Store { return newStore(t, pool, pgstore.Options{}) })
}

// BenchmarkCrossInstanceSettle: see storesuite.BenchCrossInstanceSettle.
// The wake-up is the completion's NOTIFY, B's listener its LISTEN.
func BenchmarkCrossInstanceSettle(b *testing.B) {
	table := newTable()
	storesuite.BenchCrossInstanceSettle(b, func(t testing.TB) store.Store { return instance(t, shared.DSN("postgres"), table) })
}
