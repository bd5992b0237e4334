package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	idemrt "github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/pgtest"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
	"github.com/idemrt/idem/store/redisstore"
)

// storeCase is a store with records written by a runtime, and the flags
// that point the command at it.
type storeCase struct {
	name  string
	st    store.Store
	flags []string
	// foreign writes, at key's place, what the store cannot read as a
	// record.
	foreign func(t *testing.T, key string)
}

// redisCase is a Redis store, named by host:port (not a URL).
func redisCase(t *testing.T) storeCase {
	srv := redistest.Start(t, redistest.Options{})
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	s, err := redisstore.New(bg, c, redisstore.Options{KeyPrefix: "st:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return storeCase{"redis", s, []string{"-redis", srv.Addr, "-store-prefix", "st:"}, func(t *testing.T, key string) {
		if err := c.Set(bg, s.RecordKey(key), "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}}
}

// postgresCase is a PostgreSQL store on a server of the test's own, in a
// table of another name than the default.
func postgresCase(t *testing.T) storeCase {
	srv := pgtest.Start(t, pgtest.Options{})
	dsn := srv.NewDatabase(t)
	pool, err := pgxpool.New(bg, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := pgstore.New(bg, pool, pgstore.Options{Table: "records", DisableCleanup: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(bg); err != nil {
		t.Fatal(err)
	}
	return storeCase{"postgres", s, []string{"-postgres", dsn, "-table", "records"}, func(t *testing.T, key string) {
		_, err := pool.Exec(bg, `INSERT INTO records (key, state, fence, owner, result, created_at, expires_at)
			VALUES ($1, 'zz', 1, 'o', 'v', now(), now() + interval '1 hour')`, []byte(key))
		if err != nil {
			t.Fatal(err)
		}
	}}
}

// fill writes, through a runtime: 5 completed keys of tenant-a, one failed
// (a wrapped sentinel), one in progress (a held claim with a long lease)
// and one whose lease has ended without a result (crashed work).
func fill(t *testing.T, sc storeCase) {
	registerErrors(t)
	rt := idemtest.Runtime(t, idemrt.Options{Store: sc.st})
	for i := range 5 {
		if _, err := idemrt.Do(bg, rt, store.BuildKey(fmt.Sprint("order-", i), scopeA), idemtest.Value("receipt")); err != nil {
			t.Fatal(err)
		}
	}
	failed := store.BuildKey("declined", scopeA)
	if _, err := idemrt.Do(bg, rt, failed, func(context.Context) (string, error) {
		return "", idemrt.Permanent(fmt.Errorf("charge: %w", errDeclined))
	}); err == nil {
		t.Fatal("Do succeeded")
	}
	claim := func(key string, lease time.Duration) {
		res, err := sc.st.Claim(bg, store.BuildKey(key, scopeA), store.ClaimRequest{Owner: "worker-9", Lease: lease, TTL: time.Hour})
		if err != nil || res.Status != store.Claimed {
			t.Fatalf("claim %s: %v %v", key, res.Status, err)
		}
	}
	claim("running", time.Hour)
	claim("crashed", 50*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
}

func eachStore(t *testing.T, fn func(t *testing.T, sc storeCase)) {
	for _, mk := range []func(*testing.T) storeCase{redisCase, postgresCase} {
		sc := mk(t)
		t.Run(sc.name, func(t *testing.T) {
			fill(t, sc)
			checkFrontEnds(t, sc)
			fn(t, sc)
		})
	}
}

func (sc storeCase) idem(t *testing.T, args ...string) result {
	t.Helper()
	return idem(t, append(append([]string(nil), sc.flags...), args...)...)
}

// get, state, forget (and its dry run), list and stats on Redis (by
// host:port) and PostgreSQL, of records a runtime wrote.
func TestCommandsOnEachStore(t *testing.T) {
	eachStore(t, func(t *testing.T, sc storeCase) {
		scoped := []string{"-namespace", scopeA.Namespace, "-version", scopeA.Version}
		r := sc.idem(t, append(scoped, "get", "order-1")...).want(t, exitOK)
		if r.out != "\"receipt\"\n" {
			t.Errorf("get: %q", r.out)
		}
		r = sc.idem(t, append(scoped, "state", "declined")...).want(t, exitOK)
		for _, want := range []string{"state        failed\n", "error        charge: card declined\n", "error detail card declined\n"} {
			if !strings.Contains(r.out, want) {
				t.Errorf("state of the failed key lacks %q:\n%s", want, r.out)
			}
		}
		sc.idem(t, append(scoped, "get", "running")...).want(t, exitInProgress)
		sc.idem(t, append(scoped, "get", "nothing")...).want(t, exitNoRecord)

		// forget -dry-run deletes nothing, and says so.
		r = sc.idem(t, append(scoped, "forget", "-dry-run", "order-0")...).want(t, exitOK)
		if !strings.HasPrefix(r.out, "would forget ff:idemp:tenant-a:v1:order-0 (completed)") {
			t.Errorf("forget -dry-run: %q", r.out)
		}
		var rep keyReport
		sc.idem(t, append(scoped, "-json", "forget", "-dry-run", "order-0")...).want(t, exitOK).decode(t, &rep)
		if !rep.DryRun || rep.Forgotten || rep.State != "completed" {
			t.Errorf("forget -dry-run -json: %+v", rep)
		}
		sc.idem(t, append(scoped, "forget", "-dry-run", "running")...).want(t, exitInProgress)
		sc.idem(t, append(scoped, "get", "order-0")...).want(t, exitOK)
		sc.idem(t, append(scoped, "forget", "order-0")...).want(t, exitOK)
		sc.idem(t, append(scoped, "get", "order-0")...).want(t, exitNoRecord)

		// list by state.
		for state, want := range map[string][]string{
			"completed":     {"order-1", "order-2", "order-3", "order-4"},
			"failed":        {"declined"},
			"in-progress":   {"running"},
			"expired-lease": {"crashed"},
		} {
			var page listReport
			sc.idem(t, append(scoped, "-json", "list", "-state", state)...).want(t, exitOK).decode(t, &page)
			var got []string
			for _, k := range page.Keys {
				got = append(got, strings.TrimPrefix(k.Key, store.BuildKey("", scopeA)))
				if k.State != state {
					t.Errorf("list -state %s gave a key of state %s", state, k.State)
				}
			}
			if strings.Join(sortedCopy(got), ",") != strings.Join(want, ",") || page.Next != "" {
				t.Errorf("list -state %s: %v (next %q), want %v", state, got, page.Next, want)
			}
		}
		r = sc.idem(t, append(scoped, "list", "-state", "expired-lease")...).want(t, exitOK)
		if !strings.HasPrefix(r.out, "expired-lease ff:idemp:tenant-a:v1:crashed  owner worker-9, lease ended\n") {
			t.Errorf("list -state expired-lease: %q", r.out)
		}

		// Pages of 2: every key once, the last page without a next.
		var all []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("list does not end")
			}
			args := append(scoped, "-json", "list", "-limit", "2", "-page", "3")
			if after != "" {
				args = append(args, "-after", after)
			}
			var page listReport
			sc.idem(t, args...).want(t, exitOK).decode(t, &page)
			if len(page.Keys) > 2 {
				t.Fatalf("a page of %d keys", len(page.Keys))
			}
			for _, k := range page.Keys {
				all = append(all, k.Key)
			}
			if after = page.Next; after == "" {
				break
			}
		}
		if len(all) != 7 || len(dedup(all)) != 7 {
			t.Errorf("pages listed %d keys (%d distinct), want 7: %v", len(all), len(dedup(all)), all)
		}

		// A record the store cannot read: exit 3 for its key, counted apart
		// by stats, left alone by clear.
		sc.foreign(t, store.BuildKey("foreign", scopeA))
		r = sc.idem(t, append(scoped, "get", "foreign")...).want(t, exitNoRecord)
		if want := map[string]string{"redis": "Redis key st:v3{", "postgres": `its row in table "records"`}[sc.name]; !strings.Contains(r.err, want) ||
			!strings.Contains(r.err, "is not an idem record") {
			t.Errorf("get of a foreign record: %q, want it to name %q", r.err, want)
		}
		var st statsReport
		sc.idem(t, append(scoped, "-json", "stats")...).want(t, exitOK).decode(t, &st)
		if st.Completed != 4 || st.Failed != 1 || st.InProgress != 2 || st.LeaseEnded != 1 || st.NotIdem != 1 {
			t.Errorf("stats: %+v", st)
		}
		var cl clearReport
		sc.idem(t, append(scoped, "-json", "clear", "-yes")...).want(t, exitOK).decode(t, &cl)
		if cl.Deleted != 5 || len(cl.Skipped) != 2 || len(cl.NotIdem) != 1 {
			t.Errorf("clear: %+v", cl)
		}
	})
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c
}

func dedup(s []string) map[string]bool {
	m := map[string]bool{}
	for _, k := range s {
		m[k] = true
	}
	return m
}
