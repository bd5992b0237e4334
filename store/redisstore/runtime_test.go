package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/internal/storesuite"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/redisstore"
)

var bg = context.Background()

// newStore returns a store with a prefix of its own on client.
func newStore(t testing.TB, client redis.UniversalClient) *redisstore.Store {
	t.Helper()
	return newStoreWithPrefix(t, client, fmt.Sprintf("r%d:", prefixSeq.Add(1)))
}

// newStoreWithPrefix returns a store on client with the given key prefix:
// stores with one prefix see the same keys, as instances of one service do.
func newStoreWithPrefix(t testing.TB, client redis.UniversalClient, prefix string) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(bg, client, redisstore.Options{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newRuntime(t testing.TB, opts idem.Options) *idem.Runtime { return idemtest.Runtime(t, opts) }

// deployments runs f against a single node and against a 3-master cluster.
func deployments(t *testing.T, f func(t *testing.T, client func(t testing.TB) redis.UniversalClient)) {
	t.Run("single", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, redistest.Options{})
		f(t, func(t testing.TB) redis.UniversalClient { return newClient(t, srv) })
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		cl := redistest.StartCluster(t, 3)
		f(t, func(t testing.TB) redis.UniversalClient { return newClusterClient(t, cl) })
	})
}

func eventually(t testing.TB, what string, cond func() bool) { idemtest.Eventually(t, what, cond) }

// A storm on one runtime over Redis; see storesuite.Storm.
func TestRuntimeStorm(t *testing.T) {
	deployments(t, func(t *testing.T, client func(testing.TB) redis.UniversalClient) {
		storesuite.Storm(t, newStore(t, client(t)))
	})
}

// Duplicates on many instances (runtimes with clients of their own, as
// separate processes have) over overlapping keys; see storesuite.SharedKeys.
func TestRuntimesShareRedis(t *testing.T) {
	deployments(t, func(t *testing.T, client func(testing.TB) redis.UniversalClient) {
		prefix := fmt.Sprintf("s%d:", prefixSeq.Add(1))
		storesuite.SharedKeys(t, func(t testing.TB) store.Store { return newStoreWithPrefix(t, client(t), prefix) })
	})
}

// A caller on instance B waits for the owner on instance A and is woken by
// pub/sub; see storesuite.Wake.
func TestCrossInstanceWake(t *testing.T) {
	deployments(t, func(t *testing.T, client func(testing.TB) redis.UniversalClient) {
		prefix := fmt.Sprintf("w%d:", prefixSeq.Add(1))
		storesuite.Wake(t, newStoreWithPrefix(t, client(t), prefix), newStoreWithPrefix(t, client(t), prefix), nil)
	})
}

// B's wake-ups are hidden: its re-claim timer releases it; see
// storesuite.LostWake.
func TestCrossInstanceLostWake(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	prefix := fmt.Sprintf("l%d:", prefixSeq.Add(1))
	sa, _ := redisstore.New(bg, c, redisstore.Options{KeyPrefix: prefix})
	sb, _ := redisstore.New(bg, c, redisstore.Options{KeyPrefix: prefix})
	storesuite.LostWake(t, sa, sb)
}

// When B's subscription is cut (its messages are lost while it reconnects),
// the resubscription makes B check its waits at once; see storesuite.Wake.
func TestCrossInstanceResubscribe(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	prefix := fmt.Sprintf("x%d:", prefixSeq.Add(1))
	ca, cb := newClient(t, srv), newClient(t, srv)
	sa, _ := redisstore.New(bg, ca, redisstore.Options{KeyPrefix: prefix})
	sb, _ := redisstore.New(bg, cb, redisstore.Options{KeyPrefix: prefix})
	storesuite.Wake(t, sa, sb, func() {
		// Drop every pub/sub connection, then finish while they reconnect.
		if _, err := redistest.Command(srv.Addr, "CLIENT", "KILL", "TYPE", "pubsub"); err != nil {
			t.Fatal(err)
		}
	})
}

// Records written by hand with fields missing or garbled are reported as
// errors that name the key: never a panic, never a replay.
func TestCorruptRecords(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	s := newStore(t, c)
	rt := newRuntime(t, idem.Options{Store: s, DisableCache: true})
	cases := map[string][]any{
		"no-state":      {"own", "x", "fen", "1"},
		"bad-state":     {"st", "zz", "fen", "1"},
		"bad-fence":     {"st", "c", "fen", "one", "res", "v", "ca", "1"},
		"no-result":     {"st", "c", "fen", "1", "ca", "1"},
		"no-created":    {"st", "c", "fen", "1", "res", `"v"`},
		"bad-lease":     {"st", "p", "fen", "1", "own", "o", "lu", "soon"},
		"no-fence":      {"st", "p", "own", "o", "lu", "1"},
		"no-expiry":     {"st", "c", "fen", "1", "res", `"v"`, "ca", "1"},
		"failed-no-res": {"st", "f", "fen", "1", "ca", "1"},
	}
	for key, fields := range cases {
		rk := s.RecordKey(key)
		if err := c.HSet(bg, rk, fields...).Err(); err != nil {
			t.Fatal(err)
		}
		_, err := idem.Do(bg, rt, key, idemtest.MustNotRun(t))
		var ce *redisstore.CorruptError
		if !errors.Is(err, idem.ErrStoreUnavailable) || !errors.As(err, &ce) || ce.Key != key || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: Do = %v; want a *CorruptError naming the key", key, err)
		}
		_, err = s.Get(bg, key)
		if key != "bad-lease" && key != "no-fence" && !errors.As(err, &ce) {
			t.Errorf("%s: Get = %v; want a *CorruptError", key, err)
		}
	}
}
