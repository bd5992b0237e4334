package redisstore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
)

// TestRecordSize measures what one record costs in Redis (MEMORY USAGE of
// its hash, which counts its name, so the key's length too) for
// docs/redis.md, and keeps it from growing unnoticed.
func TestRecordSize(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	s := newStore(t, c)
	fp := []byte(strings.Repeat("f", 32)) // a SHA-256 digest
	usage := func(key string) int64 {
		n, err := c.MemoryUsage(bg, s.RecordKey(key)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	owner := "0123456789abcdef-1a2b"
	res, err := s.Claim(bg, "in-progress", store.ClaimRequest{Owner: owner, Lease: time.Minute, TTL: 24 * time.Hour, Fingerprint: fp})
	if err != nil {
		t.Fatal(err)
	}
	_ = res
	inProgress := usage("in-progress")
	sizes := map[int]int64{}
	for _, n := range []int{32, 200, 1000} {
		key := fmt.Sprint("completed-", n) // the key is in the record's name: keep it short
		res, err := s.Claim(bg, key, store.ClaimRequest{Owner: owner, Lease: time.Minute, TTL: 24 * time.Hour, Fingerprint: fp})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Complete(bg, key, res.Token, store.Record{Value: []byte(strings.Repeat("v", n)), Fingerprint: fp}, 24*time.Hour); err != nil {
			t.Fatal(err)
		}
		sizes[n] = usage(key)
	}
	t.Logf("MEMORY USAGE: in progress %d B; completed with a 32 B value %d B, 200 B value %d B, 1000 B value %d B",
		inProgress, sizes[32], sizes[200], sizes[1000])
	if sizes[32] > 400 || inProgress > 400 {
		t.Fatalf("records grew: %d B in progress, %d B completed with 32 B", inProgress, sizes[32])
	}
}
