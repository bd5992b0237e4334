package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/internal/storesuite"
	"github.com/idemrt/idem/store/redisstore"
)

// The multi-process tests (storesuite.ExactlyOnce, KilledMidRun) re-execute
// this test binary as worker processes; TestMain sends them to
// storesuite.WorkerMain on a store of their own Redis client. Each
// execution records itself in Redis (RPUSH exec:<key> <worker>).

const (
	envAddr   = "IDEM_TEST_REDIS"
	envPrefix = "IDEM_TEST_PREFIX"
)

func TestMain(m *testing.M) {
	if id := storesuite.WorkerID(); id != "" {
		os.Exit(storesuite.WorkerMain(id, openWorker))
	}
	if id := os.Getenv(envFailoverWorker); id != "" {
		os.Exit(failoverWorker(id))
	}
	goleak.VerifyTestMain(m)
}

func openWorker(ctx context.Context) (storesuite.Worker, error) {
	prefix := os.Getenv(envPrefix)
	client := redis.NewClient(&redis.Options{Addr: os.Getenv(envAddr)})
	s, err := redisstore.New(ctx, client, redisstore.Options{KeyPrefix: prefix})
	if err != nil {
		client.Close()
		return storesuite.Worker{}, err
	}
	return storesuite.Worker{
		Store: s,
		Record: func(ctx context.Context, key, worker string) error {
			return client.RPush(ctx, prefix+"exec:"+key, worker).Err()
		},
		Close: func() { s.Close(); client.Close() },
	}, nil
}

// processes starts a server of the test's own for workers to share under
// a new prefix.
func processes(t *testing.T, name string) storesuite.Processes {
	p, _, _ := processesOn(t, name)
	return p
}

// processesOn is processes, with the test's client and the prefix, for a
// store of the test process's own among the workers.
func processesOn(t *testing.T, name string) (storesuite.Processes, *redis.Client, string) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	prefix := fmt.Sprintf("%s%d:", name, prefixSeq.Add(1))
	return storesuite.Processes{
		Env: []string{envAddr + "=" + srv.Addr, envPrefix + "=" + prefix},
		Executions: func(t testing.TB, keys int) [][]string {
			out := make([][]string, keys)
			for i := range out {
				l, err := c.LRange(context.Background(), fmt.Sprint(prefix, "exec:k", i), 0, -1).Result()
				if err != nil {
					t.Fatal(err)
				}
				out[i] = l
			}
			return out
		},
	}, c, prefix
}

func TestProcessesExactlyOnce(t *testing.T) {
	t.Parallel()
	storesuite.ExactlyOnce(t, processes(t, "p"))
}

func TestProcessKilledMidRun(t *testing.T) {
	t.Parallel()
	storesuite.KilledMidRun(t, processes(t, "q"))
}

// A worker holding keys through Do and httpidem is SIGKILLed: with default
// settings (a lease of 60s), its keys run again within 10s.
func TestKilledOwnerTakenOverEarly(t *testing.T) {
	t.Parallel()
	p, c, prefix := processesOn(t, "t")
	rt := newRuntime(t, idem.Options{Store: newStoreWithPrefix(t, c, prefix)})
	storesuite.KilledOwnerTakenOver(t, p, rt)
}
