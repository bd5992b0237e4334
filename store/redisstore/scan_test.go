package redisstore_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/redisstore"
)

// scanKeys pages through s's keys that start with prefix.
func scanKeys(t testing.TB, s *redisstore.Store, prefix string, limit int) []string {
	t.Helper()
	var all []string
	cursor := ""
	for {
		keys, next, err := s.Scan(bg, prefix, cursor, limit)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, keys...)
		if next == "" {
			slices.Sort(all)
			return slices.Compact(all)
		}
		cursor = next
	}
}

// Scan returns a store's keys only: not its waiter sets, not another
// store's keys, not a scope's other than its own, not Redis keys that are
// no record names; and a scoped store returns its keys without the scope.
func TestScanReturnsOwnKeysOnly(t *testing.T) {
	deployments(t, func(t *testing.T, client func(testing.TB) redis.UniversalClient) {
		c := client(t)
		s := newStore(t, c)
		other := newStore(t, c)
		scopeA, err := redisstore.New(bg, c, redisstore.Options{KeyPrefix: "scoped:", Scope: store.Scope{Namespace: "a", Version: "v1"}})
		if err != nil {
			t.Fatal(err)
		}
		scopeB, err := redisstore.New(bg, c, redisstore.Options{KeyPrefix: "scoped:", Scope: store.Scope{Namespace: "b", Version: "v1"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range []*redisstore.Store{s, other, scopeA, scopeB} {
			for _, k := range []string{"k:1", "k:2"} {
				if _, err := st.Claim(bg, k, claimReq("a")); err != nil {
					t.Fatal(err)
				}
			}
		}
		waiter := claimReq("b")
		waiter.Waiter = "instance-b" // makes k:1's waiter set
		if res, err := s.Claim(bg, "k:1", waiter); err != nil || res.Status != store.InProgress {
			t.Fatalf("claim as a waiter: %v %v", res.Status, err)
		}
		rk := s.RecordKey("k:1")
		if n, err := c.Exists(bg, rk+":w").Result(); err != nil || n != 1 {
			t.Fatalf("no waiter set %s:w (%d, %v)", rk, n, err)
		}
		prefix := strings.TrimSuffix(rk, "{k:1}")
		for _, foreign := range []string{prefix + "{k:3", prefix + "k:4}", prefix + "{k:5}x", prefix + "{k{6}", prefix + "{%zz}"} {
			if err := c.Set(bg, foreign, "x", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for _, limit := range []int{1, 100} {
			if got := scanKeys(t, s, "", limit); !slices.Equal(got, []string{"k:1", "k:2"}) {
				t.Errorf("Scan, limit %d = %q, want [k:1 k:2]", limit, got)
			}
			if got := scanKeys(t, scopeA, "k", limit); !slices.Equal(got, []string{"k:1", "k:2"}) {
				t.Errorf("Scan of a scoped store, limit %d = %q, want [k:1 k:2]", limit, got)
			}
		}
		if key, ok := scopeA.KeyOf(scopeA.RecordKey("k:1")); !ok || key != "k:1" {
			t.Errorf("KeyOf(RecordKey(k:1)) of a scoped store = %q, %v", key, ok)
		}
		if _, ok := scopeA.KeyOf(scopeB.RecordKey("k:1")); ok {
			t.Error("KeyOf took another scope's record for its own")
		}
	})
}

// Names keep keys readable and round-trip through KeyOf, whatever bytes a
// key holds.
func TestRecordKeyNames(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	s := newStoreWithPrefix(t, newClient(t, srv), "idem:")
	for key, want := range map[string]string{
		"order-1":    "idem:v3{order-1}",
		"{t}:%":      "idem:v3{%7Bt%7D:%25}",
		"a*b?[c]\\d": "idem:v3{a*b?[c]\\d}",
	} {
		if got := s.RecordKey(key); got != want {
			t.Errorf("RecordKey(%q) = %q, want %q", key, got, want)
		}
	}
	for _, key := range []string{"a", "%", "%25", "{", "}", "%7B", "}{", "a:w", "\xff", strings.Repeat("%{", 300)} {
		if got, ok := s.KeyOf(s.RecordKey(key)); !ok || got != key {
			t.Errorf("KeyOf(RecordKey(%q)) = %q, %v", key, got, ok)
		}
	}
	for _, name := range []string{"idem:v3{a}:w", "idem:v3a", "other:v3{a}", "idem:v3{a", "idem:v3{%}", "idem:v3{%7b}", "idem:v3{a}b}",
		"idem:{a}", "idem:v2{a}", "idem:v4{a}", "idem:v{a}", "idem:{" + strings.Repeat("A", 43) + "}"} {
		if key, ok := s.KeyOf(name); ok {
			t.Errorf("KeyOf(%q) = %q, want not a record", name, key)
		}
	}
}

// Scan pages through a large database with SCAN (never KEYS), each page
// about limit keys.
func TestScanUsesScanInPages(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	s := newStore(t, c)
	pipe := c.Pipeline()
	const n = 5000
	for i := range n {
		pipe.HSet(bg, s.RecordKey(fmt.Sprint("k", i)), "st", "c")
	}
	if _, err := pipe.Exec(bg); err != nil {
		t.Fatal(err)
	}
	cursor, pages, total := "", 0, 0
	for {
		keys, next, err := s.Scan(bg, "", cursor, 50)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) > 100 {
			t.Fatalf("a page of %d keys for a limit of 50", len(keys))
		}
		pages++
		total += len(keys)
		if next == "" {
			break
		}
		cursor = next
	}
	if total < n || pages < n/100 {
		t.Fatalf("%d keys in %d pages, want %d keys in pages of about 50", total, pages, n)
	}
	stats := c.Info(bg, "commandstats").Val()
	if strings.Contains(stats, "cmdstat_keys:") || !strings.Contains(stats, "cmdstat_scan:") {
		t.Fatalf("Scan did not use SCAN alone:\n%s", stats)
	}
}

// A cluster's cursor names a master; one that names no master of the
// cluster, or is garbled, is an error.
func TestScanClusterCursor(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := newClusterClient(t, cl)
	s := newStore(t, c)
	for i := range 30 {
		if _, err := s.Claim(bg, fmt.Sprint("k", i), claimReq("a")); err != nil {
			t.Fatal(err)
		}
	}
	masters := map[string]bool{}
	for _, a := range cl.Addrs() {
		masters[a] = true
	}
	_, next, err := s.Scan(bg, "", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	addr, _, ok := strings.Cut(next, "/")
	if !ok || !masters[addr] {
		t.Fatalf("cursor %q names no master of %v", next, cl.Addrs())
	}
	if _, _, err := s.Scan(bg, "", "127.0.0.1:1/0", 1); err == nil || !strings.Contains(err.Error(), "start the scan again") {
		t.Errorf("Scan from a cursor of a gone master: %v", err)
	}
	for _, bad := range []string{"x", "17", addr + "/x", "/0", "/", addr + "/"} {
		if _, _, err := s.Scan(bg, "", bad, 1); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("Scan from cursor %q: %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// A single node's cursor is a number alone: one that names a node, even
// an empty one ("/0"), is no cursor of this store, nor is a number that is
// no SCAN cursor.
func TestScanSingleCursor(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	s := newStore(t, newClient(t, srv))
	if _, next, err := s.Scan(bg, "", "0", 10); err != nil || next != "" {
		t.Fatalf("Scan from cursor 0 of an empty store: %q, %v", next, err)
	}
	for _, bad := range []string{"/0", "127.0.0.1:6379/0", "/", "x", "-1", " 1", "1 ", "0x10", "18446744073709551616"} {
		if _, _, err := s.Scan(bg, "", bad, 10); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("Scan from cursor %q: %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// Inspect reads a record the store cannot read, or a Redis key of another
// type at a record's name, as a *CorruptError naming the key.
func TestInspectCorrupt(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	s := newStore(t, c)
	cases := map[string]func(rk string) error{
		"string":    func(rk string) error { return c.Set(bg, rk, "x", time.Minute).Err() },
		"list":      func(rk string) error { return c.RPush(bg, rk, "x").Err() },
		"v2-hash":   func(rk string) error { return c.HSet(bg, rk, "st", "c", "fen", "1", "res", "v", "ca", "1").Err() },
		"bad-state": func(rk string) error { return c.Set(bg, rk, "3z01:1:o0:0:", time.Minute).Err() },
		"short":     func(rk string) error { return c.Set(bg, rk, "3p01:9:o", time.Minute).Err() },
		"no-ttl":    func(rk string) error { return c.Set(bg, rk, "3c01:1:o60000:0:v", 0).Err() },
		"no-fence":  func(rk string) error { return c.Set(bg, rk, "3c0:1:o60000:0:v", time.Minute).Err() },
		"fence-0":   func(rk string) error { return c.Set(bg, rk, "3p00:1:o0:0:", time.Minute).Err() },
	}
	for key, write := range cases {
		rk := s.RecordKey(key)
		if err := write(rk); err != nil {
			t.Fatal(err)
		}
		e, err := s.Inspect(bg, key)
		var ce *redisstore.CorruptError
		if !errors.As(err, &ce) || ce.Key != key || ce.RedisKey != rk || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: Inspect = %+v, %v; want a *CorruptError naming the key", key, e, err)
		}
	}
	_, err := s.Inspect(bg, "string")
	if err == nil || !strings.Contains(err.Error(), "not a v3 record") {
		t.Errorf("Inspect of a string: %v, want it named as not a v3 record", err)
	}
	_, err = s.Inspect(bg, "v2-hash")
	if err == nil || !strings.Contains(err.Error(), "not a string: hash") {
		t.Errorf("Inspect of a hash: %v, want it named as not a string", err)
	}
}

// Inspect measures the lease left by the server's clock and never reports
// more than the lease.
func TestInspectLeaseLeft(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	s := newStore(t, newClient(t, srv))
	req := claimReq("a")
	req.Lease = 10 * time.Second
	res, err := s.Claim(bg, "k", req)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	e, err := s.Inspect(bg, "k")
	if err != nil {
		t.Fatal(err)
	}
	if e.State != store.Held || e.Token != res.Token || e.LeaseLeft > 10*time.Second-50*time.Millisecond || e.LeaseLeft < 9*time.Second {
		t.Fatalf("Inspect = %+v, want held by %+v with about 9.95s left", e, res.Token)
	}
}

// A page never asks one SCAN call to walk more than 1000 slots (COUNT),
// however large the limit: a SCAN with COUNT 100000000 on a database of a
// million keys held the server for about 750ms. A large limit makes more
// calls instead, and a page still gets every key it can hold.
func TestScanCountIsCapped(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	s := newStore(t, c)
	pipe := c.Pipeline()
	const n = 2500
	for i := range n {
		pipe.HSet(bg, s.RecordKey(fmt.Sprint("k", i)), "st", "c")
		pipe.Set(bg, fmt.Sprint("other:", i), "x", 0)
	}
	if _, err := pipe.Exec(bg); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{"slowlog-log-slower-than", "0"}, {"slowlog-max-len", "100000"}} {
		if err := c.ConfigSet(bg, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	c.SlowLogReset(bg)
	keys, next, err := s.Scan(bg, "", "", 100_000_000)
	if err != nil || next != "" || len(keys) < n {
		t.Fatalf("Scan with a huge limit: %d keys, next %q, %v; want all %d in one page", len(keys), next, err, n)
	}
	logs, err := c.SlowLogGet(bg, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for _, l := range logs {
		if len(l.Args) == 0 || !strings.EqualFold(l.Args[0], "scan") {
			continue
		}
		calls++
		for i := 1; i+1 < len(l.Args); i++ {
			if strings.EqualFold(l.Args[i], "count") {
				if count, err := strconv.Atoi(l.Args[i+1]); err != nil || count > 1000 {
					t.Errorf("a SCAN call with COUNT %s: %q", l.Args[i+1], l.Args)
				}
			}
		}
	}
	if calls < 2 {
		t.Errorf("%d SCAN calls for a database of %d keys, want several of COUNT 1000 at most", calls, 2*n)
	}
}
