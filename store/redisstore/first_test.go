package redisstore

import "testing"

// Claims go out as SET NX while most of them find no record; once most
// miss, only one in firstProbe does, and enough hits bring them all back.
func TestFirstClaimsFollowMisses(t *testing.T) {
	var f firstClaims
	count := func() int {
		n := 0
		for range 80 {
			if f.use() {
				n++
			}
		}
		return n
	}
	if n := count(); n != 80 {
		t.Fatalf("fresh: %d of 80 claims as SET NX, want all", n)
	}
	for range 40 {
		f.record(true)
	}
	if n := count(); n != 80/firstProbe {
		t.Fatalf("after misses: %d of 80 claims as SET NX, want %d", n, 80/firstProbe)
	}
	for range 40 {
		f.record(false)
	}
	if n := count(); n != 80 {
		t.Fatalf("after hits: %d of 80 claims as SET NX, want all", n)
	}
}
