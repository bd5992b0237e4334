package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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
// again and the operations succeed.
func TestNoScriptReload(t *testing.T) {
	deployments(t, func(t *testing.T, client func(testing.TB) redis.UniversalClient) {
		c := client(t)
		s := newStore(t, c)
		var err error
		if cc, ok := c.(*redis.ClusterClient); ok {
			err = cc.ForEachMaster(bg, func(ctx context.Context, n *redis.Client) error { return n.ScriptFlush(ctx).Err() })
		} else {
			err = c.ScriptFlush(bg).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
		ops := make([]*store.Op, 20)
		for i := range ops {
			ops[i] = &store.Op{Kind: store.OpClaim, Key: fmt.Sprint("k", i),
				Claim: store.ClaimRequest{Owner: "o", Lease: time.Minute, TTL: time.Hour}}
		}
		s.Batch(bg, ops)
		for i, op := range ops {
			if op.Err != nil || op.Result.Status != store.Claimed {
				t.Fatalf("op %d after SCRIPT FLUSH: %v %v", i, op.Result.Status, op.Err)
			}
		}
	})
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
