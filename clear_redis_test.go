package idem_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/redisstore"
)

// Clear, Get and State on Redis, single node and cluster (pages of SCAN,
// on each master), from one instance, seen by another.
func TestClearOnRedis(t *testing.T) {
	for name, client := range map[string]func(t *testing.T) redis.UniversalClient{
		"single": func(t *testing.T) redis.UniversalClient {
			srv := redistest.Start(t, redistest.Options{})
			c := redis.NewClient(&redis.Options{Addr: srv.Addr})
			t.Cleanup(func() { c.Close() })
			return c
		},
		"cluster": func(t *testing.T) redis.UniversalClient {
			cl := redistest.StartCluster(t, 3)
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
			t.Cleanup(func() { c.Close() })
			return c
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := client(t)
			instance := func() *idem.Runtime {
				s, err := redisstore.New(bg, c, redisstore.Options{KeyPrefix: "clr:"})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return idemtest.Runtime(t, idem.Options{Store: s})
			}
			a, b := instance(), instance()
			acme, globex := store.Scope{Namespace: "acme", Version: "v1"}, store.Scope{Namespace: "globex", Version: "v1"}
			var keys, others []string
			for i := range 40 {
				keys = append(keys, store.BuildKey(fmt.Sprint("o-", i), acme))
				others = append(others, store.BuildKey(fmt.Sprint("o-", i), globex))
			}
			doAll(t, a, append(keys, others...)...)
			g := idemtest.NewGate()
			busy := store.BuildKey("busy", acme)
			ch := idemtest.GoDo(bg, a, busy, g.Fn("late", nil))
			<-g.Started
			if st, err := b.State(bg, busy); err != nil || st.Status != idem.KeyInProgress || st.HeldHere {
				t.Fatalf("the busy key seen by b: %+v %v", st, err)
			}
			if st, err := a.State(bg, busy); err != nil || !st.HeldHere {
				t.Fatalf("the busy key seen by a: %+v %v", st, err)
			}

			res, err := b.Clear(bg, acme, idem.ClearOptions{PageSize: 7})
			// SCAN may return a key twice: the counts are at least the keys.
			if err != nil || res.Deleted < 40 || res.Skipped < 1 || !slices.Equal(res.SkippedKeys, []string{busy}) || res.Scanned < 41 {
				t.Fatalf("%+v %v", res, err)
			}
			for _, k := range keys {
				if st, err := a.State(bg, k); err != nil || st.Status != idem.KeyAbsent {
					t.Fatalf("%s after Clear: %+v %v", k, st, err)
				}
			}
			for _, k := range others {
				if v, err := idem.Get[string](bg, b, k); err != nil || v != "v" {
					t.Fatalf("%s of another scope: %q %v", k, v, err)
				}
			}
			close(g.Open)
			if r := idemtest.Recv(t, ch); r.Err != nil || r.V != "late" {
				t.Fatalf("the run in progress during Clear: %+v", r)
			}
			if v, err := idem.Get[string](bg, b, busy); err != nil || v != "late" {
				t.Fatalf("its result: %q %v", v, err)
			}
		})
	}
}
