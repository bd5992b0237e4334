package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/internal/storesuite"
	"github.com/idemrt/idem/store"
)

// Benchmarks against a redis-server they start themselves. Compare the
// sub-benchmarks of one run (benchstat), not runs on different machines.

// BenchmarkClaimComplete: see storesuite.BenchClaimComplete. The runtime
// sends one pipeline per shard in flight; "plain" calls the store's
// scripts directly.
func BenchmarkClaimComplete(b *testing.B) {
	srv := redistest.Start(b, redistest.Options{})
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	b.Cleanup(func() { client.Close() })
	storesuite.BenchClaimComplete(b, func(t testing.TB) store.Store { return newStore(t, client) })
}

// BenchmarkCrossInstanceSettle: see storesuite.BenchCrossInstanceSettle.
// The wake-up is the finish script's PUBLISH, B's listener its subscriber.
func BenchmarkCrossInstanceSettle(b *testing.B) {
	srv := redistest.Start(b, redistest.Options{})
	storesuite.BenchCrossInstanceSettle(b, func(t testing.TB) store.Store {
		return newStoreWithPrefix(t, newClient(t, srv), "bench-settle:")
	})
}
