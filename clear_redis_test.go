package idem_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// redisRuntime is a runtime on a fresh redis-server, with its client and
// store.
func redisRuntime(t *testing.T) (*idem.Runtime, *redis.Client, *redisstore.Store) {
	srv := redistest.Start(t, redistest.Options{})
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	s, err := redisstore.New(bg, c, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return idemtest.Runtime(t, idem.Options{Store: s}), c, s
}

// Another application's key under a record's name is counted as corrupt
// and left alone; Clear goes on with the rest of the scope.
func TestClearGoesOnPastAForeignKey(t *testing.T) {
	rt, c, s := redisRuntime(t)
	var keys []string
	for i := range 50 {
		keys = append(keys, fmt.Sprint("k", i))
	}
	doAll(t, rt, keys...)
	foreign := s.RecordKey("zzz-not-idem")
	if err := c.Set(bg, foreign, "another application's", 0).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := rt.Clear(bg, store.Scope{}, idem.ClearOptions{PageSize: 10, All: true})
	if err != nil || res.Deleted != 50 || res.Corrupt != 1 {
		t.Fatalf("Clear = %+v, %v; want 50 deleted and the foreign key counted corrupt", res, err)
	}
	for _, k := range keys {
		if st, err := rt.State(bg, k); err != nil || st.Status != idem.KeyAbsent {
			t.Fatalf("%s after Clear: %+v, %v", k, st, err)
		}
	}
	if v, err := c.Get(bg, foreign).Result(); err != nil || v != "another application's" {
		t.Fatalf("the foreign key after Clear: %q, %v", v, err)
	}
}

// A released key's record stays (its fence must keep rising) but holds no
// result: Clear does not count it as deleted.
func TestClearDoesNotCountReleasedKeys(t *testing.T) {
	rt, _, _ := redisRuntime(t)
	for i := range 3 {
		if _, err := idem.Do(bg, rt, fmt.Sprint("r", i), func(context.Context) (string, error) { return "", errors.New("transient") }); err == nil {
			t.Fatal("want the transient error")
		}
	}
	doAll(t, rt, "done")
	for round := range 2 {
		res, err := rt.Clear(bg, store.Scope{}, idem.ClearOptions{All: true})
		want := 1 - round // the one result, then nothing
		if err != nil || res.Deleted != want {
			t.Fatalf("round %d: Clear = %+v, %v; want %d deleted", round, res, err, want)
		}
	}
}

// A record stored under a key longer than store.MaxKeyLen (a scoped store
// of an older version wrote it) does not stop Clear: it is deleted with the
// rest, and the pages after it are cleared too. A scoped store refuses to
// claim such a key now.
func TestClearPastAnOverLongStoredKey(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	s, err := redisstore.New(bg, c, redisstore.Options{KeyPrefix: "olk:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	rt := idemtest.Runtime(t, idem.Options{Store: s})
	acme := store.Scope{Namespace: "acme", Version: "v1"}
	var keys []string
	for i := range 30 {
		keys = append(keys, store.BuildKey(fmt.Sprint("o-", i), acme))
	}
	doAll(t, rt, keys...)
	long := store.BuildKey(strings.Repeat("z", store.MaxKeyLen), acme)
	if err := c.Copy(bg, s.RecordKey(keys[0]), s.RecordKey(long), 0, false).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := rt.Clear(bg, acme, idem.ClearOptions{PageSize: 4})
	if err != nil {
		t.Fatalf("Clear: %v (%+v)", err, res)
	}
	if res.Deleted != len(keys)+1 {
		t.Fatalf("Clear deleted %d, want %d: %+v", res.Deleted, len(keys)+1, res)
	}
	if left, _, err := s.Scan(bg, "", "", 1000); err != nil || len(left) != 0 {
		t.Fatalf("%d records left (%v)", len(left), err)
	}

	scoped, err := redisstore.New(bg, c, redisstore.Options{KeyPrefix: "olk:", Scope: acme})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { scoped.Close() })
	srt := idemtest.Runtime(t, idem.Options{Store: scoped})
	if _, err := idem.Do(bg, srt, strings.Repeat("z", store.MaxKeyLen), idemtest.Value("v")); !errors.Is(err, idem.ErrInvalidKey) {
		t.Fatalf("Do of a key too long with the scope: %v, want ErrInvalidKey", err)
	}
}
