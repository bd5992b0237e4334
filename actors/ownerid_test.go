package actors

import (
	"strings"
	"sync/atomic"
	"testing"
)

func TestOwnerIDsAreUniqueAndPrefixed(t *testing.T) {
	o := &ownerIDs{instance: "abc", seq: new(atomic.Uint64)}
	seen := map[string]bool{}
	for range 3*ownerBatch + 5 {
		id := o.get()
		if seen[id] || !strings.HasPrefix(id, "abc-") || len(id) <= len("abc-") {
			t.Fatalf("owner id %q: duplicate or malformed", id)
		}
		seen[id] = true
	}
	if !seen["abc-1"] || !seen["abc-"+"41"] { // 65 in base 36
		t.Fatal("sequence does not start at 1 or skips")
	}
}

// Shards of one set share the sequence: their owner ids never collide.
func TestShardsOwnerIDsShareTheSequence(t *testing.T) {
	var seq atomic.Uint64
	a, b := &ownerIDs{instance: "x", seq: &seq}, &ownerIDs{instance: "x", seq: &seq}
	seen := map[string]bool{}
	for range 2*ownerBatch + 3 {
		for _, id := range []string{a.get(), b.get()} {
			if seen[id] {
				t.Fatalf("owner id %q handed out twice", id)
			}
			seen[id] = true
		}
	}
}
