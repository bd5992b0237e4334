package redisstore_test

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/internal/storesuite"
)

// A Forget or a Clear on instance A reaches instance B's cache, through
// the invalidation channel; see storesuite.Invalidate.
func TestInvalidate(t *testing.T) {
	deployments(t, func(t *testing.T, client func(testing.TB) redis.UniversalClient) {
		prefix := fmt.Sprintf("i%d:", prefixSeq.Add(1))
		storesuite.Invalidate(t, newStoreWithPrefix(t, client(t), prefix), newStoreWithPrefix(t, client(t), prefix))
	})
}

// B's read of the store comes back after the invalidation: it caches
// nothing; see storesuite.InvalidateRace.
func TestInvalidateRace(t *testing.T) {
	deployments(t, func(t *testing.T, client func(testing.TB) redis.UniversalClient) {
		prefix := fmt.Sprintf("ir%d:", prefixSeq.Add(1))
		storesuite.InvalidateRace(t, newStoreWithPrefix(t, client(t), prefix), newStoreWithPrefix(t, client(t), prefix))
	})
}

// B's invalidation subscription is killed (CLIENT KILL TYPE pubsub, on
// every node): when it is back, B drops its whole cache, since what was
// published meanwhile is lost; see storesuite.InvalidateLost.
func TestInvalidateLost(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, redistest.Options{})
		prefix := fmt.Sprintf("il%d:", prefixSeq.Add(1))
		storesuite.InvalidateLost(t, newStoreWithPrefix(t, newClient(t, srv), prefix), newStoreWithPrefix(t, newClient(t, srv), prefix), func() {
			if _, err := redistest.Command(srv.Addr, "CLIENT", "KILL", "TYPE", "pubsub"); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		cl := redistest.StartCluster(t, 3)
		prefix := fmt.Sprintf("il%d:", prefixSeq.Add(1))
		storesuite.InvalidateLost(t, newStoreWithPrefix(t, newClusterClient(t, cl), prefix), newStoreWithPrefix(t, newClusterClient(t, cl), prefix), func() {
			for _, addr := range cl.Addrs() {
				if _, err := redistest.Command(addr, "CLIENT", "KILL", "TYPE", "pubsub"); err != nil {
					t.Fatal(err)
				}
			}
		})
	})
}
