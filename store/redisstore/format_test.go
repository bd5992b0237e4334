package redisstore_test

import (
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"testing"
	"time"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
)

// A record's name carries the format version of its layout ("v3" between
// the prefix and the brace), so a store never reads, lists or overwrites a
// record of another format: not one of the first format (<prefix>{<SHA-256
// of the key, base64url>}, which issue 13 left behind), not an unversioned
// <prefix>{<key>}, not a v2 hash (<prefix>v2{<key>}, which issue 15 left
// behind), not one of a later format (v4). (A value of another format at
// a v3 name is corrupt: see TestForeignKeyIsCorrupt.)
func TestRecordsOfOtherFormatsAreLeftAlone(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	s := newStoreWithPrefix(t, c, "idem:")
	if rk := s.RecordKey("order-1"); rk != "idem:v3{order-1}" {
		t.Fatalf("RecordKey(order-1) = %q, want idem:v3{order-1}", rk)
	}
	sum := sha256.Sum256([]byte("order-1"))
	others := []string{"idem:{" + base64.RawURLEncoding.EncodeToString(sum[:]) + "}", "idem:{order-1}", "idem:v2{order-1}", "idem:v4{order-1}"}
	for _, name := range others {
		err := c.HSet(bg, name, "st", "c", "own", "old", "fen", "7", "res", "old result", "fp", "", "ca", "1").Err()
		if err == nil {
			err = c.Expire(bg, name, time.Hour).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Get(bg, "order-1"); err != store.ErrNotFound {
		t.Fatalf("Get = %v, want ErrNotFound: the store read a record of another format", err)
	}
	if e, err := s.Inspect(bg, "order-1"); err != nil || e.State != store.Absent {
		t.Fatalf("Inspect = %+v, %v; want absent", e, err)
	}
	if keys := scanKeys(t, s, "", 100); len(keys) != 0 {
		t.Fatalf("Scan lists %q, records of other formats", keys)
	}
	res, err := s.Claim(bg, "order-1", claimReq("new"))
	if err != nil || res.Status != store.Claimed || res.Takeover || res.Attempt != 1 {
		t.Fatalf("Claim = %+v, %v; want a first claim", res, err)
	}
	if got := scanKeys(t, s, "", 100); !slices.Equal(got, []string{"order-1"}) {
		t.Fatalf("Scan = %q, want [order-1]", got)
	}
	for _, name := range others {
		if v := c.HGet(bg, name, "res").Val(); v != "old result" {
			t.Errorf("%s: the record of another format changed: res %q", name, v)
		}
	}
}
