package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
)

// After SCRIPT FLUSH (what a restarted or failed-over node looks like to a
// client), pipelined operations meet NOSCRIPT; the store loads its scripts
// again and the operations succeed. The keys are held before the flush,
// so that the claims after it meet the keys in progress and the
// completions have claims to finish. The server's NOSCRIPT error count
// shows that the scripts were indeed missing.
func TestNoScriptReload(t *testing.T) {
	deployments(t, func(t *testing.T, client func(testing.TB) redis.UniversalClient) {
		c := client(t)
		s := newStore(t, c)
		ops := claimOps(20, "o")
		s.Batch(bg, ops)
		toks := make([]store.Token, len(ops))
		for i, op := range ops {
			if op.Err != nil || op.Result.Status != store.Claimed {
				t.Fatalf("claim %d: %v %v", i, op.Result.Status, op.Err)
			}
			toks[i] = op.Result.Token
		}
		onMasters(t, c, func(n *redis.Client) error { return n.ScriptFlush(bg).Err() })
		before := noscriptErrors(t, c)
		ops = claimOps(10, "p") // keys 0..9: held by o, so the claim script answers
		for i := 10; i < 20; i++ {
			ops = append(ops, &store.Op{Kind: store.OpComplete, Key: fmt.Sprint("k", i), Token: toks[i],
				Record: store.Record{Value: []byte("v")}, TTL: time.Hour})
		}
		s.Batch(bg, ops)
		for i, op := range ops {
			want := store.InProgress
			if op.Kind == store.OpComplete {
				want = 0
			}
			if op.Err != nil || op.Result.Status != want {
				t.Fatalf("op %d (%v) after SCRIPT FLUSH: %v %v", i, op.Kind, op.Result.Status, op.Err)
			}
		}
		if after := noscriptErrors(t, c); after <= before {
			t.Errorf("NOSCRIPT errors %d before the batch, %d after: the batch never met a flushed script cache", before, after)
		}
	})
}

// claimOps returns n claims by owner of keys k0, k1, ...
func claimOps(n int, owner string) []*store.Op {
	ops := make([]*store.Op, n)
	for i := range ops {
		ops[i] = &store.Op{Kind: store.OpClaim, Key: fmt.Sprint("k", i),
			Claim: store.ClaimRequest{Owner: owner, Lease: time.Minute, TTL: time.Hour}}
	}
	return ops
}

// onMasters runs f on c, or on each master of a cluster client.
func onMasters(t *testing.T, c redis.UniversalClient, f func(n *redis.Client) error) {
	t.Helper()
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(bg, func(_ context.Context, n *redis.Client) error { return f(n) })
	} else {
		err = f(c.(*redis.Client))
	}
	if err != nil {
		t.Fatal(err)
	}
}

// noscriptErrors returns how many NOSCRIPT errors the servers of c have
// answered (INFO errorstats, summed over the masters).
func noscriptErrors(t *testing.T, c redis.UniversalClient) int {
	var mu sync.Mutex
	total := 0
	onMasters(t, c, func(n *redis.Client) error {
		info, err := n.Info(bg, "errorstats").Result()
		if err != nil {
			return err
		}
		count, _ := strconv.Atoi(strings.TrimPrefix(redistest.InfoField(info, "errorstat_NOSCRIPT"), "count="))
		mu.Lock()
		total += count
		mu.Unlock()
		return nil
	})
	return total
}

// publishes returns how many PUBLISH calls the server has run (scripts'
// calls included).
func publishes(t *testing.T, addr string) int {
	info, err := redistest.Command(addr, "INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_publish:calls="); ok {
			n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
			return n
		}
	}
	return 0
}

// Completing keys that nobody waits for publishes nothing; a key with a
// waiter on another instance publishes once, to that instance.
func TestPublishOnlyToWaiters(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	prefix := fmt.Sprintf("n%d:", prefixSeq.Add(1))
	mk := func() *idem.Runtime {
		s := newStoreWithPrefix(t, newClient(t, srv), prefix)
		return newRuntime(t, idem.Options{Store: s})
	}
	a, b := mk(), mk()
	for i := range 100 {
		if _, err := idem.Do(bg, a, fmt.Sprint("quiet-", i), func(context.Context) (int, error) { return i, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if n := publishes(t, srv.Addr); n != 0 {
		t.Fatalf("%d publishes for keys nobody waited on", n)
	}
	g := idemtest.NewGate()
	owner := idemtest.GoDo(bg, a, "waited", g.Fn("v", nil))
	<-g.Started
	waiter := idemtest.GoDo(bg, b, "waited", idemtest.MustNotRun(t))
	eventually(t, "B parked", func() bool { return b.Stats().Waiters == 1 })
	close(g.Open)
	idemtest.Recv(t, owner)
	idemtest.Recv(t, waiter)
	if n := publishes(t, srv.Addr); n != 1 {
		t.Fatalf("%d publishes for one waiting instance, want 1", n)
	}
}
