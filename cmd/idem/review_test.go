package main

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

// storeDone stores value as key's result in sc's store.
func storeDone(t *testing.T, sc storeCase, key string, ttl time.Duration) {
	t.Helper()
	res, err := sc.st.Claim(bg, key, store.ClaimRequest{Owner: "w", Lease: time.Minute, TTL: time.Hour})
	if err != nil || res.Status != store.Claimed {
		t.Fatalf("claim %q: %v %v", key, res.Status, err)
	}
	if _, err := sc.st.Complete(bg, key, res.Token, store.Record{Value: []byte("v")}, ttl); err != nil {
		t.Fatal(err)
	}
}

// pageAll pages list through with -limit limit, and returns every key
// listed, in order; it fails the test when paging does not end.
func pageAll(t *testing.T, sc storeCase, limit int, args ...string) []string {
	t.Helper()
	var all []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 50 {
			t.Fatalf("list does not end: keys so far %q", all)
		}
		a := append(append([]string(nil), args...), "-json", "list", "-limit", fmt.Sprint(limit))
		if after != "" {
			a = append(a, "-after", after)
		}
		var page listReport
		sc.idem(t, a...).want(t, exitOK).decode(t, &page)
		for _, k := range page.Keys {
			key := k.Key
			if k.KeyBase64 != "" {
				b, err := base64.StdEncoding.DecodeString(k.KeyBase64)
				if err != nil {
					t.Fatal(err)
				}
				key = string(b)
			}
			all = append(all, key)
		}
		if after = page.Next; after == "" {
			return all
		}
	}
}

// A key that is not valid UTF-8 ends a page: its -after must name it
// exactly, or the next page never finds it and lists the scan page again,
// forever.
func TestListCursorKeyNotUTF8(t *testing.T) {
	for _, mk := range []func(*testing.T) storeCase{redisCase, postgresCase} {
		sc := mk(t)
		t.Run(sc.name, func(t *testing.T) {
			keys := []string{"k-\xff1", "k-\xff2", "k-\xff3"}
			for _, k := range keys {
				storeDone(t, sc, k, time.Hour)
			}
			got := pageAll(t, sc, 1, "-key-prefix", "k-")
			if len(got) != 3 || len(dedup(got)) != 3 {
				t.Errorf("pages listed %q, want each of %q once", got, keys)
			}
		})
	}
}

// A page that ends with the scope's last key has no next page.
func TestListLastPageExactlyFull(t *testing.T) {
	for _, mk := range []func(*testing.T) storeCase{redisCase, postgresCase} {
		sc := mk(t)
		t.Run(sc.name, func(t *testing.T) {
			for i := range 3 {
				storeDone(t, sc, fmt.Sprint("k-", i), time.Hour)
			}
			var page listReport
			sc.idem(t, "-json", "list", "-limit", "3").want(t, exitOK).decode(t, &page)
			if len(page.Keys) != 3 || page.Next != "" {
				t.Errorf("list -limit 3 of 3 keys: %d keys, next %q; want 3 and no next", len(page.Keys), page.Next)
			}
			r := sc.idem(t, "list", "-limit", "3").want(t, exitOK)
			if strings.Contains(r.err, "-after") {
				t.Errorf("list -limit 3 of 3 keys offers a next page: %s", r.err)
			}
		})
	}
}

// A last page that is full before the scope's last keys, which are not
// idem records, counts those: no next page will.
func TestListLastPageCountsNotIdem(t *testing.T) {
	sc := postgresCase(t) // keys in order: the foreign one comes last
	for i := range 3 {
		storeDone(t, sc, fmt.Sprint("k-", i), time.Hour)
	}
	sc.foreign(t, "k-9")
	var page listReport
	sc.idem(t, "-json", "list", "-limit", "3").want(t, exitOK).decode(t, &page)
	if len(page.Keys) != 3 || page.Next != "" || page.NotIdem != 1 {
		t.Errorf("list -limit 3: %d keys, next %q, not_idem %d; want 3, none, 1", len(page.Keys), page.Next, page.NotIdem)
	}
}
