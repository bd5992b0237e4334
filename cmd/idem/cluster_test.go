package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
)

// On a 3-master cluster, named by its nodes or by a URL: get and forget by
// key, clear and stats over the masters.
func TestCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	t.Cleanup(func() { c.Close() })
	byNodes := newFixture(t, c, "-cluster", strings.Join(cl.Addrs(), ","))
	t.Run("clear", func(t *testing.T) {
		checkClear(t, byNodes, 60, 7) // keys on every master, pages across them
	})
	t.Run("stats", func(t *testing.T) {
		f := newFixture(t, c, "-cluster", "redis://"+cl.Addrs()[0]+"?addr="+cl.Addrs()[1])
		seedScopes(f, 40)
		var rep statsReport
		f.idem(append(slices.Clone(scopeAFlags), "stats", "-json", "-page", "5")...).want(t, exitOK).decode(t, &rep)
		if rep.Keys != 43 || rep.Completed != 40 || rep.Failed != 1 || rep.InProgress != 1 || rep.NotIdem != 1 {
			t.Errorf("stats on a cluster: %+v", rep)
		}
		var all statsReport
		f.idem("stats", "-json").want(t, exitOK).decode(t, &all)
		if all.Keys != 45 {
			t.Errorf("stats of the whole store prefix on a cluster: %d keys, want 45", all.Keys)
		}
		key := store.BuildKey("order-3", scopeA)
		if r := f.idem("get", key).want(t, exitOK); r.out != "vvvv\n" {
			t.Errorf("get on a cluster: %q", r.out)
		}
		f.idem("forget", key).want(t, exitOK)
		if f.state(key) != store.Absent {
			t.Error("forget on a cluster left the key")
		}
	})
	t.Run("list", func(t *testing.T) {
		// Pages of 7 out of scans of 5, across the masters: every
		// completed key once.
		f := newFixture(t, c, "-cluster", strings.Join(cl.Addrs(), ","))
		seedScopes(f, 30)
		seen := map[string]int{}
		after := ""
		for pages := 0; ; pages++ {
			if pages > 20 {
				t.Fatal("list does not end")
			}
			args := append(slices.Clone(scopeAFlags), "-json", "list", "-state", "completed", "-limit", "7", "-page", "5")
			if after != "" {
				args = append(args, "-after", after)
			}
			var page listReport
			f.idem(args...).want(t, exitOK).decode(t, &page)
			for _, k := range page.Keys {
				seen[k.Key]++
			}
			if after = page.Next; after == "" {
				break
			}
		}
		if len(seen) != 30 {
			t.Errorf("list on a cluster reached %d keys, want 30", len(seen))
		}
		// A page resumes inside a SCAN page of the cursor before; Redis
		// may resize a freshly filled table between two pages, and SCAN
		// then answers that cursor with other keys: the page cannot find
		// where it stopped and lists the stretch again (the docs say a key
		// may be listed twice, never skipped). Seen once in about ten runs.
		twice := 0
		for k, n := range seen {
			if n > 1 {
				twice++
				t.Logf("%s listed %d times", k, n)
			}
		}
		if twice > 7 {
			t.Errorf("%d keys listed more than once: more than one page's worth", twice)
		}
	})
}
