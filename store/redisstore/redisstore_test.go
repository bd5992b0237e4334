package redisstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/redisstore"
	"github.com/idemrt/idem/store/storetest"
)

var prefixSeq atomic.Int64

// harness runs the suite on one Redis deployment; every store gets a prefix
// of its own, so the subtests do not see each other's keys.
func harness(client redis.UniversalClient) storetest.Harness {
	return storetest.Harness{
		New: func(t testing.TB) store.Store {
			s, err := redisstore.New(context.Background(), client, redisstore.Options{
				KeyPrefix: fmt.Sprintf("t%d:", prefixSeq.Add(1)),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		Advance: func(_ testing.TB, d time.Duration) { time.Sleep(d) },
		Unit:    50 * time.Millisecond,
		Seeds:   3,
	}
}

func newClient(t testing.TB, srv *redistest.Server) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

func newClusterClient(t testing.TB, cl *redistest.Cluster) *redis.ClusterClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestConformanceSingle(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	storetest.Run(t, harness(newClient(t, srv)))
}

func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	storetest.Run(t, harness(newClusterClient(t, cl)))
}
