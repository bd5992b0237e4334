package actors

import (
	"strings"
	"testing"
)

func TestOwnerIDsAreUniqueAndPrefixed(t *testing.T) {
	o := &ownerIDs{instance: "abc"}
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
